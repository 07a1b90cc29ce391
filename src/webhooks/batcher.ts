// Batching (`webhooks.batching`): the events of one app and endpoint are merged into one
// request, sent when `size` events are waiting or `duration` ms after the first of them,
// whichever comes first. Off: one request per event. Either way the body is
// {"time_ms", "events": […]}, time_ms being when the request is made.

import type { Config } from '../config/types';
import { requestBody, type WebhookEvent } from './events';
import type { Job } from './send';

interface Pending {
  app: string;
  url: string;
  events: WebhookEvent[];
  timer: NodeJS.Timeout | null;
}

export class Batcher {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly cfg: Config['webhooks']['batching'],
    private readonly emit: (job: Job) => void,
    private readonly now: () => number = Date.now,
  ) {}

  add(app: string, url: string, event: WebhookEvent): void {
    if (!this.cfg.enabled) return this.emit(this.job(app, url, [event]));
    const key = app + '\n' + url;
    let p = this.pending.get(key);
    if (!p) {
      p = { app, url, events: [], timer: null };
      this.pending.set(key, p);
      const batch = p;
      p.timer = setTimeout(() => this.flushOne(key, batch), this.cfg.duration);
    }
    p.events.push(event);
    if (p.events.length >= this.cfg.size) this.flushOne(key, p);
  }

  /** Sends every batch now (graceful stop). */
  flush(): void {
    for (const [key, p] of [...this.pending]) this.flushOne(key, p);
  }

  private flushOne(key: string, p: Pending): void {
    if (this.pending.get(key) !== p) return;
    this.pending.delete(key);
    if (p.timer) clearTimeout(p.timer);
    this.emit(this.job(p.app, p.url, p.events));
  }

  private job(app: string, url: string, events: WebhookEvent[]): Job {
    return { app, url, body: requestBody(events, this.now()), events: events.map((e) => e.name) };
  }
}
