// One node of a ringcast cluster, on the primary thread, above any Transport:
//
//   local publishes   shards ─(bridge)─▶ primary ─▶ the channel's bucket subject (once per
//                     process; buckets.ts), or `<prefix>.pub` for the channels every node keeps
//   remote publishes  the buckets this node subscribes (those with a local subscriber) and
//                     `<prefix>.pub` ─▶ primary ─(bridge: interest routing)─▶ shards
//   health            heartbeats on `<prefix>.ctl`; a node silent for node_timeout_ms is
//                     declared failed by the next cleanup pass (onNodeFailed listeners);
//                     a node that does not hear its own heartbeat back renews its
//                     transport (echo.ts)
//   questions         `req` on `<prefix>.ctl`, each other node answers on `<prefix>.node.<id>`
//
// A node drops its own publishes by node id (every backend echoes them), so each publish
// reaches each node's subscribers once. A node whose heartbeat names another wire version
// (adapter/wire.ts WIRE_VERSION) is not a member: its messages are dropped, counted and
// logged once (nodes of different versions do not mix). Order per channel per publishing node holds: the
// primary receives a shard's publishes in bus order and the transport keeps per-publisher
// order on one subject.

import { Attr, SpanKind, tracing } from '../tracing/tracer';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { BusFullError } from '../bus/errors';
import type { Bridge } from '../channels/bridge';
import type { Config } from '../config/types';
import { noMetrics, type MetricsSink } from '../metrics/types';
import { bucketOf } from '../channels/interest';
import { startBucketPlane, type BucketPlane } from './buckets';
import { ECHO_CHECK_MS, EchoWatch } from './echo';
import type { Transport } from './transport';
import { decodeNode, encodeNodeMsg, encodeNodePublish, isPublishFrom, Kind, publishSender, WIRE_VERSION, type NodeMsg } from './wire';
import { logLimited } from '../log';

export type ClusterHealth = Config['adapter']['cluster_health'];

/** How long a stopping node waits for its `bye` to come back from the backend. */
const STOP_ECHO_WAIT_MS = 1000;
/** Node ids remembered as dropped without a `bye` (a killed node's id never comes back: the oldest are forgotten). */
const MAX_DROPPED = 1000;

/** What the layers above the node exchange (presence, watchlists, connection counts). */
export type PeerMsg = Extract<NodeMsg, { t: 'member' | 'sync' | 'counts' | 'conns' | 'user' | 'users' | 'apps' }>;

/** Answers a question of another node (a handler per request kind). */
export type Answerer = (body: unknown, from: string) => unknown;

export interface ClusterNode {
  readonly id: string;
  /** Node ids currently alive (this one included). */
  nodes(): string[];
  /**
   * The oldest alive node: the smallest id (ids start with the start time). It decides
   * what one node must: the webhooks over an unordered backend (transitions.ts), a failed
   * node's webhooks, the delta stream numbering (delta/coord.ts).
   */
  oldest(): string;
  /**
   * Asks every other alive node; resolves with the answers that came within timeoutMs
   * (`complete` false when a node did not answer in time or the backend is down).
   */
  ask(kind: string, body: unknown, timeoutMs: number): Promise<{ answers: unknown[]; complete: boolean }>;
  /** Registers the answer to a kind of question. */
  answer(kind: string, fn: Answerer): void;
  /**
   * A node was seen for the first time, or again after this node dropped it without a
   * `bye` (`rejoined`: declared failed, or its wire version was not ours). A rejoined node
   * does not know it was dropped, so it does not send its state again by itself: the
   * layers above ask it (`ask` in their state messages).
   */
  onNodeJoined(fn: (node: string, rejoined: boolean) => void): void;
  /** A node is gone: it stopped (`failed` false) or was declared failed. One call per node. */
  onNodeGone(fn: (node: string, failed: boolean) => void): void;
  /** Sends a message of the layers above (presence) to every node. false: the backend is down. */
  broadcast(msg: PeerMsg): boolean;
  /** Messages of the layers above from other nodes. */
  onPeerMsg(fn: (msg: PeerMsg) => void): void;
  /**
   * This node's own `member` and `counts` messages, as the backend echoes them: at their
   * place in the order every node sees the control subject in (adapter/presence.ts).
   */
  onEcho(fn: (msg: PeerMsg) => void): void;
  /**
   * Whether `node`'s heartbeat named another wire version (or none): the layers with
   * subjects of their own (delta/coord.ts) drop its messages as this one does.
   */
  foreign(node: string): boolean;
  /** The data plane by interest (buckets.ts); null when every publish goes on `<prefix>.pub`. */
  readonly buckets: BucketPlane | null;
  /** Whether the backend is reachable now. */
  isUp(): boolean;
  /** Called when stop() begins (the layers above stop their timers). */
  onStop(fn: () => void): void;
  stop(): Promise<void>;
}

export interface ClusterDeps {
  transport: Transport;
  /** Subject prefix (nats.prefix, or the Redis key_prefix + 'ringcast'). */
  prefix: string;
  bridge: Bridge;
  health: ClusterHealth;
  log: Logger;
  metrics?: MetricsSink;
  /** The node's id (newNodeId(); tests fix one); a new one when absent. */
  nodeId?: string;
  /** Publishes by bucket (buckets.ts); absent: every publish on `<prefix>.pub`. */
  buckets?: {
    count: number;
    lingerMs: number;
    subject: (b: number) => string;
    interest: (b: number) => boolean;
    ready: SharedArrayBuffer;
    /** Channels whose publishes every node needs (cache channels remembered by every node's owner): on `<prefix>.pub`. */
    everywhere: (app: string, channel: string) => boolean;
  };
}

/**
 * A node id: the start time first (ms, 12 hex digits), so the smallest id is the oldest
 * node, then 8 random hex digits.
 */
export function newNodeId(): string {
  return Date.now().toString(16).padStart(12, '0') + randomBytes(4).toString('hex');
}

export async function startClusterNode(deps: ClusterDeps, connectTimeoutMs: number): Promise<ClusterNode> {
  const { transport: tx, prefix, bridge, health, log } = deps;
  const metrics = deps.metrics ?? noMetrics;
  // the start time first (ms, 12 hex digits): the smallest id is the oldest node, which
  // decides what one node must (the webhooks over an unordered backend, transitions.ts;
  // the delta stream numbering, delta/coord.ts): a node joining does not take it over
  const id = deps.nodeId ?? newNodeId();
  const subj = { pub: `${prefix}.pub`, ctl: `${prefix}.ctl`, me: `${prefix}.node.${id}` };
  /** Other nodes → last heartbeat (ms). */
  const peers = new Map<string, number>();
  const answerers = new Map<string, Answerer>();
  const joinedListeners: ((node: string, rejoined: boolean) => void)[] = [];
  /** Nodes dropped without a `bye` (declared failed, another wire version), oldest first, at most MAX_DROPPED. */
  const dropped = new Set<string>();
  const goneListeners: ((node: string, failed: boolean) => void)[] = [];
  const peerListeners: ((msg: PeerMsg) => void)[] = [];
  const echoListeners: ((msg: PeerMsg) => void)[] = [];
  const pending = new Map<number, { expect: Set<string>; answers: unknown[]; done(complete: boolean): void }>();
  let nextReq = 1;
  let stopped = false;
  const stopListeners: (() => void)[] = [];
  /** Set while stop() waits for its `bye` to come back (every earlier echo is in by then). */
  let byeEchoed: (() => void) | null = null;
  /** `bye` sent: nothing more goes out (the transport stays open only for the echoes). */
  let left = false;

  const activeGauge = () => metrics.set('cluster_nodes_active', {}, peers.size + 1);
  /** Nodes whose heartbeat named another wire version → that version (-1: none). */
  const foreign = new Map<string, number>();

  /** A heartbeat's version: false (and the node dropped, logged once) when it is not ours. */
  function compatible(node: string, v: number | undefined): boolean {
    if (v === WIRE_VERSION) {
      if (foreign.delete(node)) log.info({ node }, 'cluster: node speaks this wire version now');
      return true;
    }
    if (!foreign.has(node)) {
      log.error({ node, version: v ?? 'none', ours: WIRE_VERSION },
        'cluster: a node speaks another cluster wire version: its messages are ignored (run one ringcast version across the cluster)');
    }
    foreign.set(node, v ?? -1);
    gone(node, false);
    return false;
  }

  const renew = tx.renew?.bind(tx);
  const echo = new EchoWatch({
    isUp: () => !stopped && !left && renew !== undefined && tx.isUp(),
    renew: () => renew!(),
    probe: () => heartbeat(),
    onDeaf: (ms) => {
      metrics.inc('cluster_transport_renewals_total');
      log.warn({ backend: tx.name, where: tx.where, overdue_ms: ms },
        'cluster: this node\'s own heartbeat did not come back from the backend although it is connected: renewing its connections and subscriptions');
    },
    onRenewFailed: (err) => log.warn({ backend: tx.name, where: tx.where, error: err instanceof Error ? err.message : String(err) },
      'cluster: renewing the backend connections failed; tried again when the next heartbeat does not come back'),
  });

  /** One heartbeat on the control subject; false: not sent. */
  function heartbeat(): boolean {
    return send(subj.ctl, { t: 'hb', node: id, v: WIRE_VERSION });
  }

  function send(subject: string, msg: NodeMsg): boolean {
    // after its `bye` a node says nothing more: another node would take it back as alive
    if (left) return false;
    if (msg.t === 'bye') left = true;
    const ok = tx.publish(subject, encodeNodeMsg(msg));
    if (!ok) metrics.inc('adapter_errors_total');
    else if (msg.t === 'hb') echo.sent();
    return ok;
  }

  function seen(node: string): void {
    if (node === id) return;
    const known = peers.has(node);
    peers.set(node, Date.now());
    if (!known) {
      activeGauge();
      log.info({ node }, 'cluster: node joined');
      // answer at once so that a node that just started learns of this one without
      // waiting a heartbeat interval
      heartbeat();
      const rejoined = dropped.delete(node);
      for (const fn of joinedListeners) fn(node, rejoined);
    }
  }

  function gone(node: string, failed: boolean, bye = false): void {
    if (!peers.delete(node)) return;
    activeGauge();
    if (!bye) {
      dropped.add(node);
      if (dropped.size > MAX_DROPPED) dropped.delete(dropped.values().next().value!);
    }
    if (failed) {
      metrics.inc('cluster_nodes_failed_total');
      log.warn({ node }, 'cluster: node declared failed');
    } else {
      log.info({ node }, 'cluster: node left');
    }
    for (const p of pending.values()) if (p.expect.delete(node) && p.expect.size === 0) p.done(true);
    for (const fn of goneListeners) fn(node, failed);
  }

  function onControl(msg: NodeMsg): void {
    if (msg.node === id) {
      if (msg.t === 'hb') echo.echoed();
      else if (msg.t === 'member' || msg.t === 'counts') for (const fn of echoListeners) fn(msg);
      else if (msg.t === 'bye') byeEchoed?.();
      return;
    }
    if (msg.t === 'hb' && !compatible(msg.node, msg.v)) return;
    if (foreign.has(msg.node)) {
      metrics.inc('adapter_errors_total');
      return;
    }
    switch (msg.t) {
      case 'hb':
        seen(msg.node);
        return;
      case 'bye':
        gone(msg.node, false, true);
        return;
      case 'member':
      case 'sync':
      case 'counts':
      case 'conns':
      case 'user':
      case 'users':
      case 'apps':
        seen(msg.node);
        for (const fn of peerListeners) fn(msg);
        return;
      case 'req': {
        seen(msg.node);
        const fn = answerers.get(msg.kind);
        const to = `${prefix}.node.${msg.node}`;
        if (!fn) {
          send(to, { t: 'res', node: id, id: msg.id, body: null, error: `no answer for ${msg.kind}` });
          return;
        }
        Promise.resolve()
          .then(() => fn(msg.body, msg.node))
          .then(
            (body) => send(to, { t: 'res', node: id, id: msg.id, body }),
            (err: Error) => send(to, { t: 'res', node: id, id: msg.id, body: null, error: err.message }),
          );
        return;
      }
      case 'res': {
        const p = pending.get(msg.id);
        if (!p || !p.expect.delete(msg.node)) return;
        if (msg.error === undefined) p.answers.push(msg.body);
        else log.warn({ node: msg.node, error: msg.error }, 'cluster: a node could not answer');
        if (p.expect.size === 0) p.done(msg.error === undefined);
        return;
      }
    }
  }

  function onPublish(buf: Uint8Array): void {
    if (isPublishFrom(buf, id)) return; // our own publish, echoed by the backend: not decoded
    if (foreign.size > 0) {
      const sender = publishSender(buf);
      if (sender !== null && foreign.has(sender)) {
        metrics.inc('adapter_errors_total');
        return;
      }
    }
    let d;
    try {
      d = decodeNode(buf);
    } catch (err) {
      metrics.inc('adapter_errors_total');
      logLimited(log, 'warn', { err }, 'cluster: dropped a frame that is not a ringcast node frame');
      return;
    }
    if (d.kind === Kind.Control) return onControl(d.msg);
    if (d.node === id) return; // our own publish, echoed by the backend
    seen(d.node);
    const f = d.frame;
    try {
      bridge.publish(f.app, f.channel, f.except, Buffer.from(f.message).toString(), typeof f.tags === 'string' ? f.tags : null, d.delta);
    } catch (err) {
      metrics.inc('adapter_errors_total');
      if (err instanceof BusFullError) logLimited(log, 'warn', { channel: f.channel }, 'cluster: a remote publish was dropped: the shards\' queues are full');
      else throw err;
    }
  }

  await tx.connect(connectTimeoutMs);
  const handler = (buf: Uint8Array) => {
    try {
      onPublish(buf);
    } catch (err) {
      metrics.inc('adapter_errors_total');
      log.error({ err }, 'cluster: handling a node frame failed');
    }
  };
  for (const s of [subj.pub, subj.ctl, subj.me]) {
    await tx.subscribe(s, handler);
    metrics.inc('adapter_subscribe_total');
  }
  const b = deps.buckets;
  const plane = b ? startBucketPlane({
    transport: tx, buckets: b.count, lingerMs: b.lingerMs, subject: b.subject, interest: b.interest, ready: b.ready, handler, log, metrics,
  }) : null;
  const subjectOf = (app: string, channel: string) => b && !b.everywhere(app, channel) ? b.subject(bucketOf(app, channel, b.count)) : subj.pub;

  bridge.onLocal((f, delta) => {
    if (left) return; // after `bye`: the other nodes no longer count this one
    const sent = tx.publish(subjectOf(f.app, f.channel), encodeNodePublish(id, f, delta));
    if (f.trace) tracing()?.step('ringcast.adapter.publish', SpanKind.PRODUCER, f.trace, { [Attr.AppId]: f.app, [Attr.Channel]: f.channel, 'ringcast.adapter.backend': tx.name, 'ringcast.adapter.sent': sent });
    if (sent) metrics.inc('adapter_publish_total');
    else {
      metrics.inc('adapter_errors_total');
      logLimited(log, 'warn', { backend: tx.name, channel: f.channel }, 'cluster: a publish was not sent to the other nodes: the backend is down or not answering');
    }
  });

  tx.onState((up) => {
    echo.reset();
    if (up) log.info({ backend: tx.name, where: tx.where }, 'cluster: backend reachable again');
    else log.warn({ backend: tx.name, where: tx.where }, 'cluster: backend unreachable; local delivery goes on, remote publishes are lost until it is back');
    if (up) heartbeat();
  });

  const timers: NodeJS.Timeout[] = [setInterval(() => echo.check(), ECHO_CHECK_MS)];
  const beat = () => {
    if (!heartbeat()) metrics.inc('cluster_heartbeat_failures_total');
  };
  beat(); // the first one always: the other nodes learn of this one now
  if (health.enabled) {
    timers.push(setInterval(beat, health.heartbeat_interval_ms));
    timers.push(setInterval(() => {
      // After an event-loop stall the timers run before the sockets are read: the peers'
      // heartbeats of the stall may be waiting there. The pass runs once they are read
      // (setImmediate: after this turn's I/O), so a stall here declares nobody failed.
      setImmediate(() => {
        // While our own backend is down every peer looks silent: declare nobody failed then.
        if (stopped || !tx.isUp()) return;
        const limit = Date.now() - health.node_timeout_ms;
        for (const [node, last] of [...peers]) if (last < limit) gone(node, true);
      });
    }, health.cleanup_interval_ms));
  }
  for (const t of timers) t.unref();
  activeGauge();
  log.info({ node: id, backend: tx.name, where: tx.where }, 'cluster: joined');

  return {
    id,
    nodes: () => [id, ...peers.keys()],
    oldest() {
      let min = id;
      for (const n of peers.keys()) if (n < min) min = n;
      return min;
    },
    ask(kind, body, timeoutMs) {
      const expect = new Set(peers.keys());
      if (expect.size === 0) return Promise.resolve({ answers: [], complete: true });
      const reqId = nextReq++;
      return new Promise((resolve) => {
        const answers: unknown[] = [];
        const done = (complete: boolean) => {
          clearTimeout(timer);
          pending.delete(reqId);
          resolve({ answers, complete: complete && expect.size === 0 });
        };
        const timer = setTimeout(() => done(false), timeoutMs);
        pending.set(reqId, { expect, answers, done });
        if (!send(subj.ctl, { t: 'req', node: id, id: reqId, kind, body })) done(false);
      });
    },
    answer(kind, fn) {
      answerers.set(kind, fn);
    },
    onNodeJoined(fn) {
      joinedListeners.push(fn);
    },
    onNodeGone(fn) {
      goneListeners.push(fn);
    },
    broadcast(msg) {
      return send(subj.ctl, msg);
    },
    onPeerMsg(fn) {
      peerListeners.push(fn);
    },
    onEcho(fn) {
      echoListeners.push(fn);
    },
    foreign: (node) => foreign.has(node),
    buckets: plane,
    isUp: () => tx.isUp(),
    onStop(fn) {
      stopListeners.push(fn);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const fn of stopListeners) fn();
      for (const t of timers) clearInterval(t);
      plane?.stop();
      for (const p of pending.values()) p.done(false);
      // the echoes of this node's last messages decide its last webhooks (adapter/
      // transitions.ts): wait for the `bye` behind them, within a bound
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, STOP_ECHO_WAIT_MS);
        byeEchoed = () => {
          clearTimeout(timer);
          resolve();
        };
        if (!send(subj.ctl, { t: 'bye', node: id })) byeEchoed();
      });
      await tx.close();
    },
  };
}
