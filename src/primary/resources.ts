// What start() has started so far, closed in reverse when a later step fails: a failure at
// any step of the startup stops everything started before it, and only that.

import type { Logger } from 'pino';

export class StartedResources {
  private readonly closers: { name: string; close: () => unknown }[] = [];

  constructor(private readonly log: Logger) {}

  /** Records a started resource and how to close it. */
  add(name: string, close: () => unknown): void {
    this.closers.push({ name, close });
  }

  /** Closes every recorded resource, newest first; a close that fails is logged and the rest still close. */
  async closeAll(): Promise<void> {
    for (let c = this.closers.pop(); c; c = this.closers.pop()) {
      try {
        await c.close();
      } catch (err) {
        this.log.warn({ err, resource: c.name }, 'startup rollback: could not close a started resource');
      }
    }
  }
}
