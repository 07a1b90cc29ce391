// The console's live log: browsers watching an app get the tap events of every shard
// (console/tap.ts) as a text/event-stream. The hub tells the shards which apps are watched
// (a `tap` command to each, again to a shard started later, e.g. after a crash) and fans the
// shards' batches out to the streams of each app.

import type { ServerResponse } from 'node:http';
import type { Worker } from 'node:worker_threads';
import type { TapCommand, TapEvent, TapReport } from './tap';

/** How often the hub looks for shard threads it has not seen yet (a restarted shard). */
const RESCAN_MS = 1000;
/** A comment line this often keeps proxies from closing an idle stream. */
const KEEPALIVE_MS = 15_000;

export interface Hub {
  /** Streams the events of `app` to `res` until the client goes away. */
  watch(app: string, res: ServerResponse): void;
  /** An event that happened in the primary (a publish from the console). */
  emit(ev: TapEvent): void;
  close(): void;
}

export function createHub(shards: () => readonly Worker[]): Hub {
  const streams = new Map<string, Set<ServerResponse>>();
  const seen = new WeakSet<Worker>();

  const command = (): TapCommand => ({ type: 'tap', apps: [...streams.keys()] });

  function send(app: string, payload: unknown): void {
    const line = `data: ${JSON.stringify(payload)}\n\n`;
    for (const res of streams.get(app) ?? []) res.write(line);
  }

  function onShard(e: { type: string }): void {
    if (e.type !== 'tap') return;
    const r = e as TapReport;
    for (const ev of r.events) send(ev.app, ev);
    if (r.dropped > 0) for (const app of streams.keys()) send(app, { t: Date.now(), app, kind: 'dropped', count: r.dropped });
  }

  /** Adopts shard threads not seen yet; with `all`, tells every shard the watched apps. */
  function sync(all: boolean): void {
    const cmd = command();
    for (const w of shards()) {
      const fresh = !seen.has(w);
      if (fresh) {
        seen.add(w);
        w.on('message', onShard);
      }
      if (fresh || all) {
        try {
          w.postMessage(cmd);
        } catch { /* a shard that is ending; its replacement is adopted on the next scan */ }
      }
    }
  }

  const rescan = setInterval(() => sync(false), RESCAN_MS);
  rescan.unref();
  const keepalive = setInterval(() => {
    for (const set of streams.values()) for (const res of set) res.write(': keepalive\n\n');
  }, KEEPALIVE_MS);
  keepalive.unref();
  sync(true);

  return {
    watch(app, res) {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
      res.write(': watching\n\n');
      let set = streams.get(app);
      const added = !set;
      if (!set) streams.set(app, (set = new Set()));
      set.add(res);
      if (added) sync(true);
      res.on('close', () => {
        set.delete(res);
        if (set.size === 0 && streams.get(app) === set) {
          streams.delete(app);
          sync(true);
        }
      });
    },
    emit(ev) {
      send(ev.app, ev);
    },
    close() {
      clearInterval(rescan);
      clearInterval(keepalive);
      for (const set of streams.values()) for (const res of set) res.end();
      streams.clear();
      for (const w of shards()) w.off('message', onShard);
    },
  };
}
