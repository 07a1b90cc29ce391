// Commands from the primary over the thread's port: drain, shutdown, metrics, the console's tap,
// a config reload, the test hooks, and the failover's own (rewire, restore).

import { deepFreeze } from '../config/freeze';
import type { ShardContext } from './context';
import type { Failover } from './failover';
import { heapFigures, type PrimaryCommand, type ShardEvent } from './init';
import { applyApps } from '../reload/shard';

export function createCommandHandler(ctx: ShardContext, failover: Failover, shutdownNow: (final: ShardEvent) => void, drain: (unreadyMs: number, windowMs: number) => void): (cmd: PrimaryCommand) => void {
  const { init, promMetrics, post, log, bus } = ctx;
  const answerMetrics = (req: number): void => {
    if (!promMetrics) return post({ type: 'metrics', req, metrics: [] });
    promMetrics.json().then((m) => post({ type: 'metrics', req, metrics: m }),
      (err: unknown) => log.error({ err }, 'could not collect metrics'));
  };
  return (cmd) => {
    if (cmd.type === 'shutdown' && !ctx.stopping) shutdownNow({ type: 'stopped' });
    else if (cmd.type === 'drain') drain(cmd.unreadyMs, cmd.windowMs);
    else if (cmd.type === 'metrics') answerMetrics(cmd.req);
    else if (cmd.type === 'tap') ctx.tap?.watch(cmd.apps);
    else if (cmd.type === 'apps') {
      try {
        const closed = applyApps({ apps: ctx.apps, sockets: ctx.sockets, metrics: ctx.metrics, out: ctx.out }, deepFreeze(cmd.apps), cmd.slots);
        post({ type: 'apps_applied', closed, error: null });
      } catch (err) {
        post({ type: 'apps_applied', closed: 0, error: (err as Error).message });
      }
    }
    else if (cmd.type === 'test_pause_bus') {
      if (!init.testHooks) return;
      bus.pauseDraining(cmd.ms);
      post({ type: 'test_bus_paused', socketIdPrefix: init.socketIdPrefix });
    }
    else if (cmd.type === 'test_gc') {
      if (!init.testHooks) return;
      (globalThis as { gc?: () => void }).gc?.();
      post({ type: 'test_gc_done', heap: heapFigures() });
    }
    else failover.command(cmd);
  };
}
