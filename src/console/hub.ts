// The console's live log: browsers watching an app get the tap events of every shard
// (console/tap.ts) as a text/event-stream. The hub tells the shards which apps are watched
// (a `tap` command to each, again to a shard started later, e.g. after a crash) and fans the
// shards' batches out to the streams of each app.
//
// Backpressure: a browser that does not read leaves bytes in the server's send buffer
// (res.writableLength: node's queue plus the socket's). Past `maxBufferedBytes` for one
// stream, its events are dropped and counted (nothing else is queued for it, so its memory
// stays at the bound); once it has read down to half the bound (node's 'drain', or the next
// event), it gets one `{kind:"dropped", reason:"slow_client", count}` event and the live
// log goes on. The other streams are not held back.

import type { ServerResponse } from 'node:http';
import type { Worker } from 'node:worker_threads';
import type { TapCommand, TapEvent, TapReport } from './tap';

/** How often the hub looks for shard threads it has not seen yet (a restarted shard). */
const RESCAN_MS = 1000;
/** A comment line this often keeps proxies from closing an idle stream. */
const KEEPALIVE_MS = 15_000;

/** What the hub reports (metrics). */
export interface HubEvents {
  /** Events not written to a slow stream. */
  dropped(n: number): void;
  /** Bytes waiting in the send buffers of every stream, now. */
  buffered(bytes: number): void;
}

interface Stream {
  res: ServerResponse;
  /** Events dropped since it went over the bound (0: it is not). */
  dropped: number;
}

export interface Hub {
  /** Streams the events of `app` to `res` until the client goes away. */
  watch(app: string, res: ServerResponse): void;
  /** Streams open now. */
  readonly streams: number;
  /** An event that happened in the primary (a publish from the console). */
  emit(ev: TapEvent): void;
  close(): void;
}

export function createHub(shards: () => readonly Worker[], maxBufferedBytes: number, events: HubEvents): Hub {
  const streams = new Map<string, Set<Stream>>();
  const seen = new WeakSet<Worker>();

  const command = (): TapCommand => ({ type: 'tap', apps: [...streams.keys()] });

  /** After a drop: once the stream has room again, it is told how many it missed. */
  function resume(st: Stream, app: string): void {
    if (st.dropped === 0 || st.res.writableLength > maxBufferedBytes / 2) return;
    const count = st.dropped;
    st.dropped = 0;
    st.res.write(`data: ${JSON.stringify({ t: Date.now(), app, kind: 'dropped', reason: 'slow_client', count })}\n\n`);
  }

  function write(st: Stream, app: string, line: string): void {
    resume(st, app);
    if (st.dropped > 0 || st.res.writableLength >= maxBufferedBytes) {
      st.dropped++;
      events.dropped(1);
    } else st.res.write(line);
  }

  function send(app: string, payload: unknown): void {
    const set = streams.get(app);
    if (set === undefined) return;
    const line = `data: ${JSON.stringify(payload)}\n\n`;
    for (const st of set) write(st, app, line);
  }

  function report(): void {
    let bytes = 0;
    for (const set of streams.values()) for (const st of set) bytes += st.res.writableLength;
    events.buffered(bytes);
  }

  function onShard(e: { type: string }): void {
    if (e.type !== 'tap') return;
    const r = e as TapReport;
    for (const ev of r.events) send(ev.app, ev);
    if (r.dropped > 0) for (const app of streams.keys()) send(app, { t: Date.now(), app, kind: 'dropped', reason: 'shard_limit', count: r.dropped });
    report();
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
    for (const set of streams.values()) for (const st of set) if (st.res.writableLength < maxBufferedBytes) st.res.write(': keepalive\n\n');
    report();
  }, KEEPALIVE_MS);
  keepalive.unref();
  sync(true);

  let open = 0;
  return {
    get streams() {
      return open;
    },
    watch(app, res) {
      open++;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
      res.write(': watching\n\n');
      let set = streams.get(app);
      const added = !set;
      if (!set) streams.set(app, (set = new Set()));
      const st: Stream = { res, dropped: 0 };
      set.add(st);
      if (added) sync(true);
      res.on('drain', () => resume(st, app));
      res.on('close', () => {
        open--;
        set.delete(st);
        if (set.size === 0 && streams.get(app) === set) {
          streams.delete(app);
          sync(true);
        }
      });
    },
    emit(ev) {
      send(ev.app, ev);
      report();
    },
    close() {
      clearInterval(rescan);
      clearInterval(keepalive);
      for (const set of streams.values()) for (const st of set) st.res.end();
      streams.clear();
      for (const w of shards()) w.off('message', onShard);
    },
  };
}
