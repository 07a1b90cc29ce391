// Primary side of a config reload (SIGHUP → cli.ts → RunningServer.reload): plans the
// change of apps (reload/plan.ts), sends the new list to every shard and waits for each
// to apply it (reload/shard.ts), and keeps it for shards started later (a restart after
// a crash gets the apps in force, not those of the start). One reload at a time.

import type { Logger } from 'pino';
import { planReload, type AppsApplied, type AppsCommand, type ReloadPlan } from './plan';
import { deepFreeze, loadConfig } from '../config';
import { assertSupported } from '../config/support';
import type { AppConfig, Config } from '../config/types';

export interface ReloadResult extends Omit<ReloadPlan, 'apps' | 'slots'> {
  /** Connections closed (removed or disabled apps), over every shard. */
  closed: number;
}

/** What shards are started with: the reload keeps its `apps` and `appSlots` current. */
export interface ReloadBase {
  apps: AppConfig[];
  appSlots: Record<string, number>;
}

/**
 * Sends `cmd` to every running shard and resolves with each shard's answer, in shard
 * order: null for a shard that did not answer in time (main.ts, over primary/spawn.ts).
 */
export type Broadcast = (cmd: AppsCommand) => Promise<(AppsApplied | null)[]>;

export interface Reloader {
  /** The config in force: the start's, with the apps of the last reload. */
  current(): Config;
  /** Applies the apps of `next`; rejects (a ConfigError or ReloadError, nothing changed) when it cannot. */
  reload(next: Config): Promise<ReloadResult>;
}

export function createReloader(start: Config, base: ReloadBase, broadcast: Broadcast, capacity: number, log: Logger): Reloader {
  let config = start;
  let chain: Promise<unknown> = Promise.resolve();

  async function run(next: Config): Promise<ReloadResult> {
    assertSupported(next);
    const plan = planReload(config, base.appSlots, next, capacity);
    const cmd: AppsCommand = { type: 'apps', apps: plan.apps, slots: plan.slots };
    // Kept before sending: a shard restarted from here on starts with the new apps.
    base.apps = plan.apps;
    base.appSlots = plan.slots;
    config = deepFreeze({ ...config, apps: plan.apps });
    const answers = await broadcast(cmd);
    let closed = 0;
    answers.forEach((a, shard) => {
      if (a === null) log.warn({ shard }, 'reload: a shard did not confirm the new apps in time');
      else if (a.error !== null) log.error({ shard, error: a.error }, 'reload: a shard refused the new apps');
      else closed += a.closed;
    });
    const { apps: _apps, slots: _slots, ...summary } = plan;
    const result = { ...summary, closed };
    log.info({ added: result.added, removed: result.removed, changed: result.changed, disabled: result.disabled, closed }, 'configuration reloaded');
    if (result.restartKeys.length > 0) {
      log.warn({ keys: result.restartKeys }, 'reload: these settings changed in the file but only take effect at the next restart');
    }
    return result;
  }

  return {
    current: () => config,
    reload(next) {
      const p = chain.then(() => run(next));
      chain = p.catch(() => undefined);
      return p;
    },
  };
}

/**
 * SIGHUP handler of `ringcast start`, installed before the server starts (a SIGHUP's
 * default action would end the process): once attach()ed to the running server, it reads
 * the config file (and the environment) again and reloads the apps. Before that it only
 * logs. A file that does not load or validate, or apps that cannot be applied, leave the
 * running config as it is; the reason is logged.
 */
export function reloadOnSighup(file: string | null, log: Logger): { attach(server: { reload(next: Config): Promise<ReloadResult> }): void; remove(): void } {
  let server: { reload(next: Config): Promise<ReloadResult> } | null = null;
  const onHup = () => {
    if (!server) return log.warn('SIGHUP before the server listens: ignored (send it again once it does)');
    log.info({ file }, 'SIGHUP: reloading the apps from the configuration');
    const refused = (err: unknown) => log.error({ file, error: (err as Error).message }, 'reload refused: the running configuration is kept');
    let next: Config;
    try {
      next = loadConfig({ file, env: process.env });
    } catch (err) {
      return refused(err);
    }
    server.reload(next).catch(refused);
  };
  process.on('SIGHUP', onHup);
  return {
    attach(s) {
      server = s;
    },
    remove() {
      process.off('SIGHUP', onHup);
    },
  };
}
