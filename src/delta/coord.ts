// delta_compression.cluster_coordination: every node of the cluster sends the same
// messages of a stream in full, whichever node they were published on and whenever a
// node started. The primary of each node runs this, above the cluster transport.
//
//   origin node   shard ─(coordRoute: control delta_origin)─▶ primary ── req ──▶ `<prefix>.dseq.req.<coordinator>`
//   coordinator   the node with the smallest id: numbers the stream (a counter per
//                 (app, channel, event, conflation value)) ── record ──▶ `<prefix>.dseq`
//   every node    record ─▶ its sequencer, as [force|STAMPED][position][envelope] (delta/wire.ts)
//
// The sequencer takes the position as the message's seq and counts the interval on it
// (delta/streams.ts rule 4), so full messages fall on the same positions on every node.
// Plain subscribers never wait for any of this: the plain publish crosses the cluster as
// before (adapter/cluster.ts); only the delta variant takes this road, and in this mode
// the sequencer hears of an event only through a record (shards and the bridge do not
// route to it directly).
//
// Rules
//  1. A node feeds its sequencer with each record once: its own records when they come
//     back from the backend (so a node's delta subscribers see the cluster's order), the
//     others' deduplicated by (origin node, origin number).
//  2. Fallback: when the coordinator's record does not come within COORD_TIMEOUT_MS (the
//     backend or the coordinator is down, the coordinator changed), or the backend is
//     down, the origin publishes the record without a position and feeds its own
//     sequencer with it: every node decides that message locally (streams.ts rule 2).
//     Counted in delta_coordination_fallbacks_total. After a timeout the origin decides
//     locally at once for SUSPECT_MS, then asks again (a dead coordinator is noticed by
//     cluster health only after node_timeout_ms: until then each event would wait).
//     A record that comes back ends it.
//  3. The origin names the coordinator in its request (the smallest id it knows of) and
//     only that node answers: while views of the cluster differ (a node joining) no
//     request is numbered twice; one sent to a node that died goes unanswered (rule 2).
//     The smallest id is the oldest node (ids start with the start time, adapter/
//     cluster.ts), so a node joining takes over only across clock skew between hosts.
//     A new coordinator (the old one stopped or failed, or such a node joined) starts
//     its counters at 0: every stream's next message is full on every node, and the
//     numbering restarts (a position not after the base goes full: streams.ts rule 4).
//  4. The coordinator forgets a stream's counter after max_state_age_secs without a
//     message, like the sequencers forget the stream itself.
//  5. Records and requests of a node that speaks another cluster wire version
//     (adapter/wire.ts WIRE_VERSION; the cluster learns it from its heartbeat) are
//     dropped and counted in adapter_errors_total, as the cluster drops its other
//     messages: such a node is not a member, so it is never the coordinator either.

import type { Logger } from 'pino';
import type { ClusterNode, Transport } from '../adapter';
import type { ControlMsg } from '../bus/messages';
import type { Interest } from '../channels/interest';
import type { OutboundStage, Outgoing, PipelineBus, StageWrites } from '../channels/publisher';
import type { Config } from '../config/types';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { isEncrypted } from '../protocol/channels';
import { ChannelSettings, type Algo } from './settings';
import { conflationValueOf, forceOf, stampedInput } from './wire';
import { logLimited } from '../log';

/** How long an origin waits for the coordinator's record before deciding locally (rule 2). */
export const COORD_TIMEOUT_MS = 1000;
/** After a timeout, how long events are decided locally without asking (rule 2). */
const SUSPECT_MS = 5000;

export type DeltaOrigin = Extract<ControlMsg, { type: 'delta_origin' }>;

/** A record on `<prefix>.dseq` (p: the position, -1 for none) or a request on `.dseq.req` (k: the stream). */
interface Wire {
  o: string;
  i: number;
  a: string;
  c: string;
  x: string;
  f: number;
  m: string;
  /** The event's tags (tag-filtered delta streams, delta/sequencer.ts rule 4). */
  t?: string;
  p?: number;
  k?: string;
  /** Request: the coordinator the origin chose (the only node that answers it). */
  to?: string;
}

/** Whether this process numbers delta streams with the cluster (validation refuses it with the local adapter). */
export function coordinated(config: Config): boolean {
  const dc = config.delta_compression;
  return dc.enabled && dc.cluster_coordination && config.adapter.driver !== 'local';
}

/**
 * The delta stage of a shard with cluster_coordination: each local event of a channel
 * deltas may apply to goes to the primary for its position, not to the sequencer. In the
 * publish's batch: the primary asks the coordinator only for a publish that was committed.
 */
export function coordRoute(primary: number): OutboundStage {
  return {
    out(m: Outgoing, w: StageWrites): boolean {
      if (m.kind !== 'api' && m.kind !== 'client') return false;
      // a subscription's own `delta` may turn any channel on (settings.ts), so every one
      // but the encrypted ones
      if (isEncrypted(m.channel)) return false;
      w.control(primary, { type: 'delta_origin', app: m.app, channel: m.channel, except: m.except, force: forceOf(m.delta), message: m.message, ...(m.tags ? { tags: m.tags } : {}) });
      return false;
    },
  };
}

/** An event published on this node only (the console's), for its delta clients. */
export type DeltaLocal = (app: string, channel: string, message: string) => void;

/**
 * The console publishes through the primary's endpoint, whose publishes do not reach the
 * sequencer in this mode (they are the other nodes' events): this one's are fed to it.
 */
export function withDeltaLocal<E extends { publish(app: string, channel: string, except: string, message: string, tags?: string | null): void }>(endpoint: E, local: DeltaLocal | null): E {
  if (local === null) return endpoint;
  return {
    ...endpoint,
    publish(app: string, channel: string, except: string, message: string, tags?: string | null) {
      endpoint.publish(app, channel, except, message, tags);
      local(app, channel, message);
    },
  };
}

export interface DeltaCoordDeps {
  config: Config;
  node: ClusterNode;
  transport: Transport;
  prefix: string;
  /** The primary's end of the mesh. */
  bus: PipelineBus;
  sequencer: number;
  /** The delta interest tables (read only). */
  interest: Record<Algo, Interest>;
  log: Logger;
  metrics?: MetricsSink;
  timeoutMs?: number;
}

export interface DeltaCoord {
  /** A local event from a shard (control delta_origin). */
  origin(msg: DeltaOrigin): void;
  /** An event for this node's clients only (the console's): decided locally, no position. */
  local(app: string, channel: string, message: string): void;
  stop(): void;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

export async function startDeltaCoordination(deps: DeltaCoordDeps): Promise<DeltaCoord> {
  const { node, transport: tx, bus, log } = deps;
  const metrics = deps.metrics ?? noMetrics;
  const timeoutMs = deps.timeoutMs ?? COORD_TIMEOUT_MS;
  const settings = new ChannelSettings(deps.config.apps);
  const subj = { rec: `${deps.prefix}.dseq`, req: (n: string) => `${deps.prefix}.dseq.req.${n}` };
  const to = [deps.sequencer];
  const scratch: number[] = [];
  const tables = [deps.interest.fossil, deps.interest.xdelta3];
  /** Own requests waiting for their record. */
  const pending = new Map<number, NodeJS.Timeout>();
  /** Coordinator: stream → next position, last use (rule 4). */
  const counters = new Map<string, { next: number; used: number }>();
  /** Other nodes' records seen lately (rule 1): two generations, rotated. */
  let seen = new Set<string>();
  let seenBefore = new Set<string>();
  let nextId = 1;
  /** Rule 2: after a timeout, decide locally at once until then (no wait per message). */
  let suspectUntil = 0;


  function feed(r: Wire): void {
    let wanted = false;
    for (const t of tables) if (t.targets(r.a, r.c, scratch).length > 0) wanted = true;
    if (!wanted) return;
    try {
      bus.publishTo(to, r.a, r.c, r.x, stampedInput(r.f, r.p ?? -1, r.m), r.t ?? null);
    } catch (err) {
      metrics.inc('adapter_errors_total');
      logLimited(log, 'warn', { err, channel: r.c }, 'delta coordination: the sequencer\'s queue is full; a message was not sequenced');
    }
  }

  function fallback(r: Wire): void {
    metrics.inc('delta_coordination_fallbacks_total');
    const local: Wire = { ...r, p: -1, k: undefined };
    tx.publish(subj.rec, enc.encode(JSON.stringify(local)));
    feed(local);
  }

  /** Rule 5: a message of a node of another wire version (counted, not read further). */
  function alien(r: Wire): boolean {
    if (typeof r.o === 'string' && !node.foreign(r.o)) return false;
    metrics.inc('adapter_errors_total');
    return true;
  }

  function onRecord(buf: Uint8Array): void {
    const r = JSON.parse(dec.decode(buf)) as Wire;
    if (alien(r)) return;
    if (r.o === node.id) {
      const timer = pending.get(r.i);
      if (timer === undefined) return; // decided locally already (rule 2)
      suspectUntil = 0; // the coordinator answers again
      clearTimeout(timer);
      pending.delete(r.i);
      feed(r);
      return;
    }
    const key = r.o + ' ' + r.i;
    if (seen.has(key) || seenBefore.has(key)) return;
    seen.add(key);
    feed(r);
  }

  /** false: not sent (the backend is down). */
  function stamp(r: Wire): boolean {
    const key = r.a + ' ' + r.c + '\0' + r.k!;
    const now = Date.now();
    let c = counters.get(key);
    if (c === undefined) {
      c = { next: 0, used: now };
      counters.set(key, c);
    }
    c.used = now;
    const rec: Wire = { o: r.o, i: r.i, a: r.a, c: r.c, x: r.x, f: r.f, m: r.m, t: r.t, p: c.next++ };
    if (tx.publish(subj.rec, enc.encode(JSON.stringify(rec)))) return true;
    metrics.inc('adapter_errors_total');
    return false;
  }

  function onRequest(buf: Uint8Array): void {
    const r = JSON.parse(dec.decode(buf)) as Wire;
    if (alien(r)) return;
    // the node the origin chose answers, whatever its own view (two nodes never both
    // answer while their views of the cluster differ)
    if (r.to === node.id) stamp(r);
  }

  const guard = (what: string, fn: (b: Uint8Array) => void) => (b: Uint8Array) => {
    try {
      fn(b);
    } catch (err) {
      metrics.inc('adapter_errors_total');
      log.warn({ err }, `delta coordination: a ${what} that could not be read`);
    }
  };
  await tx.subscribe(subj.rec, guard('record', onRecord));
  await tx.subscribe(subj.req(node.id), guard('request', onRequest));

  const maxAge = deps.config.delta_compression.max_state_age_secs * 1000;
  const timers = [
    setInterval(() => {
      seenBefore = seen;
      seen = new Set();
    }, Math.max(10 * timeoutMs, 5000)),
    setInterval(() => {
      const limit = Date.now() - maxAge;
      for (const [k, c] of counters) if (c.used <= limit) counters.delete(k);
    }, Math.min(10_000, maxAge)),
  ];
  for (const t of timers) t.unref();

  return {
    origin(msg) {
      const r: Wire = { o: node.id, i: nextId++, a: msg.app, c: msg.channel, x: msg.except, f: msg.force, m: msg.message, t: msg.tags };
      let parsed: { event?: unknown; data?: unknown };
      try {
        parsed = JSON.parse(msg.message) as typeof parsed;
      } catch {
        parsed = {};
      }
      const ch = settings.of(msg.app, msg.channel);
      const value = ch.conflationKey === null ? '' : conflationValueOf(parsed.data, ch.conflationKey.split('.'));
      r.k = String(parsed.event) + '\0' + value;
      if (!tx.isUp() || Date.now() < suspectUntil) return fallback(r);
      const timer = setTimeout(() => {
        pending.delete(r.i);
        if (Date.now() >= suspectUntil) log.warn({ channel: r.c, coordinator: node.oldest() }, 'delta coordination: no stream position in time; deciding locally for a while');
        suspectUntil = Date.now() + SUSPECT_MS;
        fallback(r);
      }, timeoutMs);
      pending.set(r.i, timer);
      // the coordinator numbers its own events at once: one trip through the backend less
      r.to = node.oldest();
      const sent = r.to === node.id ? stamp(r) : tx.publish(subj.req(r.to), enc.encode(JSON.stringify(r)));
      if (!sent) {
        clearTimeout(timer);
        pending.delete(r.i);
        fallback(r);
      }
    },
    local(app, channel, message) {
      if (!isEncrypted(channel)) feed({ o: node.id, i: 0, a: app, c: channel, x: '', f: 0, m: message, p: -1 });
    },
    stop() {
      for (const t of timers) clearInterval(t);
      for (const t of pending.values()) clearTimeout(t);
      pending.clear();
    },
  };
}
