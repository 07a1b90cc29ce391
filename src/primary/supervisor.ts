// The primary's shard supervisor: restarts a crashed shard in place (fresh rings, the
// survivors rewired, the replacement rebuilt from their restores), moved out of main.ts.

import { randomInt } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus';
import { createDoorbell } from '../bus/doorbell';
import type { ControlMsg } from '../bus/messages';
import { createRingBuffer } from '../bus/ring';
import type { BusTopology } from '../bus/topology';
import type { PrimaryEndpoint } from '../channels/bridge';
import { Interest } from '../channels/interest';
import type { SequencerHandle } from '../delta/spawn';
import type { MetricsSink } from '../metrics/types';
import type { PrimaryCommand, ShardEvent, ShardInit } from '../shard/init';
import { eventOf, spawnShard, type ShardHandle } from './spawn';

/** What every shard of this server shares; a replacement shard starts with the same (its rings renewed). */
export type ShardBase = Omit<ShardInit, 'shardId' | 'socketIdPrefix' | 'restoreFrom'>;

export interface Started {
  /** The primary's end of the mesh (thread index = shards). */
  bus: Bus;
  endpoint: PrimaryEndpoint;
  /** Current shard thread per index (a restart replaces its entry). */
  handles: ShardHandle[];
  port: number;
  base: ShardBase;
  /** Current socket_id prefix per index; `usedPrefixes` holds every one ever handed out. */
  prefixes: string[];
  usedPrefixes: Set<string>;
  /** Control messages a shard sends the primary (the cluster's questions); set once the cluster is up. */
  control: {
    handler: ((msg: ControlMsg, from: number) => void) | null;
    /** A shard's rings were renewed for its replacement (the cluster re-sends its remote state). */
    renewed: ((shard: number) => void) | null;
  };
  /** The delta sequencer (thread shards + 1); null with delta_compression.enabled false. */
  sequencer: SequencerHandle | null;
}


// ── Shard restart (docs/architecture.md, "Shard failure") ──────────────────────
//
// A shard that throws closes its listener and its sockets and posts `crashed` (shard/
// failover.ts); it is never terminated (a thread holding uWS sockets must end by itself).
// The primary then, one restart at a time:
//  1. allocates fresh rings to and from that index and a fresh doorbell (the old ones may
//     hold half-read state); frames still in flight to the dead thread are dropped;
//  2. sends `rewire` to every surviving shard: it swaps its bus ends, drops the dead shard's
//     connections from the records it owns (member_removed / vacated once), re-announces
//     its subscriptions of the channels the dead shard owned, answers `rewired`;
//  3. starts the replacement with the same index on the same port (SO_REUSEPORT; the old
//     listener is already closed when `crashed` arrives) and a new socket_id prefix; it
//     rebuilds its records from the `restore` messages waiting in its rings and posts
//     `restored`.
// The primary's own bus end is rewired in step 2 as well, and the dead shard's interest
// bits are cleared (its replacement starts with no subscription).

/** How long a survivor may take to answer `rewire`, and a replacement to rebuild, before the restart goes on. */
const REWIRE_TIMEOUT_MS = 2000;
const RESTORE_TIMEOUT_MS = 5000;
/** A replacement that cannot listen is retried this many times, 1 s apart; then the index stays down. */
const RESTART_ATTEMPTS = 5;

export interface Supervisor {
  /** No more restarts; resolves when a restart under way has ended. */
  stop(): Promise<void>;
  /** Resolves when every crashed shard thread has ended. */
  drained(): Promise<void>;
  /** Test hook: see RunningServer.testCrashShard. */
  testCrash(shard: number, how: 'timer' | 'ws_message'): Promise<{ socketIdPrefix: string }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Fresh rings to and from thread `i` (every peer, the primary included) and a fresh doorbell. */
function renewRings(topo: BusTopology, i: number, ringBytes: number): void {
  for (let j = 0; j < topo.threads; j++) {
    if (j === i) continue;
    topo.rings[i][j] = createRingBuffer(ringBytes);
    topo.rings[j][i] = createRingBuffer(ringBytes);
  }
  topo.doorbells[i] = createDoorbell();
}

export function superviseShards(started: Started, log: Logger, metrics: MetricsSink): Supervisor {
  const { handles, base } = started;
  const topo = base.topology;
  let stopping = false;
  let chain: Promise<void> = Promise.resolve();
  const dying = new Set<ShardHandle>();
  const waiters = new Map<number, { resolve(r: { socketIdPrefix: string }): void; reject(err: Error): void }[]>();
  let recent: number[] = [];

  function settle(i: number, prefix: string | null): void {
    for (const w of waiters.get(i)?.splice(0) ?? []) {
      if (prefix) w.resolve({ socketIdPrefix: prefix });
      else w.reject(new Error(`shard ${i} could not be restarted`));
    }
  }

  function watch(i: number, h: ShardHandle): void {
    let down = false;
    const onDown = (why: string) => {
      if (down || stopping || handles[i] !== h) return;
      down = true;
      dying.add(h);
      void h.exited.then(() => dying.delete(h));
      log.error({ shard: i, why }, 'shard crashed; restarting it');
      chain = chain.then(() => restart(i)).catch((err: unknown) => {
        log.error({ err, shard: i }, 'shard restart failed');
        settle(i, null);
      });
    };
    h.worker.on('message', (e: ShardEvent) => {
      if (e.type === 'crashed') onDown(e.error);
    });
    // A thread that ended without `crashed` (it could not run its handler) has no listener left either.
    void h.exited.then((code) => onDown(`thread exited (code ${code})`));
  }

  async function restart(i: number): Promise<void> {
    // shard_restarts_total: the primary's registry when metrics are on (noMetrics otherwise: the log line is the record).
    metrics.inc('shard_restarts_total');
    const now = Date.now();
    recent = recent.filter((t) => now - t < 60_000);
    recent.push(now);
    if (recent.length > 3) await sleep(Math.min(5000, 250 * 2 ** (recent.length - 4))); // a crash loop: back off
    for (let attempt = 1; attempt <= RESTART_ATTEMPTS && !stopping; attempt++) {
      const t0 = Date.now();
      renewRings(topo, i, topo.ringBytes);
      const primary = base.shards; // the primary's thread index
      started.bus.rewire(i, topo.rings[primary][i]!, topo.rings[i][primary]!, topo.doorbells[i]);
      new Interest(base.interest, base.shards, -1).clearShard(i);
      started.control.renewed?.(i);
      if (base.delta && started.sequencer) {
        for (const t of Object.values(base.delta.interest)) new Interest(t, base.shards, -1).clearShard(i);
        const s = base.delta.sequencer;
        const ok = await started.sequencer.rewire({ type: 'rewire', shard: i, toPeer: topo.rings[s][i]!, fromPeer: topo.rings[i][s]!, doorbell: topo.doorbells[i] }, REWIRE_TIMEOUT_MS);
        if (!ok) log.warn({ shard: i }, 'the delta sequencer did not answer rewire in time');
      }
      const survivors: number[] = [];
      handles.forEach((h, j) => { if (j !== i && !dying.has(h)) survivors.push(j); });
      const acks = await Promise.all(survivors.map((j) => {
        const cmd: PrimaryCommand = { type: 'rewire', shard: i, toPeer: topo.rings[j][i]!, fromPeer: topo.rings[i][j]!, doorbell: topo.doorbells[i] };
        const ack = eventOf(handles[j], (e) => e.type === 'rewired' && e.shard === i, REWIRE_TIMEOUT_MS);
        handles[j].worker.postMessage(cmd);
        return ack;
      }));
      if (acks.some((a) => a === null)) log.warn({ shard: i }, 'a surviving shard did not answer rewire in time; starting the replacement anyway');
      if (stopping) return;
      let prefix: string;
      do prefix = String(randomInt(100_000_000, 999_999_999)); while (started.usedPrefixes.has(prefix));
      started.usedPrefixes.add(prefix);
      const { handle, ready } = spawnShard({ ...base, shardId: i, socketIdPrefix: prefix, restoreFrom: survivors }, log);
      const restored = eventOf(handle, (e) => e.type === 'restored', RESTORE_TIMEOUT_MS);
      const r = await ready;
      if (r.type === 'ready') {
        handles[i] = handle;
        started.prefixes[i] = prefix;
        watch(i, handle);
        const done = await restored;
        log.warn({ shard: i, socketIdPrefix: prefix, ms: Date.now() - t0, rebuild: done }, 'shard restarted');
        settle(i, prefix);
        return;
      }
      log.error({ shard: i, attempt }, 'replacement shard could not listen');
      await handle.exited;
      await sleep(1000);
    }
    if (!stopping) log.fatal({ shard: i }, 'shard could not be restarted: its channels are unavailable until the server restarts');
    settle(i, null);
  }

  handles.forEach((h, i) => watch(i, h));
  return {
    stop() {
      stopping = true;
      return chain;
    },
    async drained() {
      await Promise.all([...dying].map((h) => h.exited));
    },
    testCrash(shard, how) {
      const h = handles[shard];
      if (!h) return Promise.reject(new RangeError(`no shard ${shard}`));
      return new Promise((resolve, reject) => {
        const list = waiters.get(shard) ?? [];
        list.push({ resolve, reject });
        waiters.set(shard, list);
        const cmd: PrimaryCommand = { type: 'test_crash', how };
        h.worker.postMessage(cmd);
      });
    },
  };
}

