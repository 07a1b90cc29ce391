// adapter.cluster_secret: the trust boundary of the cluster backend. Without a secret,
// anyone who can publish on the backend under the cluster's prefix is a node: it can
// inject events, fake presence members and counts, and take the decider's place. With a
// secret, every frame this node sends on the transport is signed (wire.ts signFrame: an
// HMAC-SHA256 tag over the subject and the exact bytes), and every frame it receives is
// checked before anything reads it: a frame without a tag, or with a tag that is not the
// secret's for that subject, is dropped, counted (adapter_frames_rejected_total{reason})
// and logged (rate limited). So nodes with different secrets do not talk to each other.
//
// A node without a secret drops signed frames the same way (reason `signed`): it cannot
// check them, and it names the misconfiguration instead of failing to decode them.
//
// Freshness: each signed frame carries its sender's random id, clock and sequence number
// under the tag (wire.ts). A frame whose clock is more than FRESH_MS from this node's is
// dropped (reason `stale`), and so is a sequence number of a sender already seen (reason
// `replayed`: a frame captured on the backend and published again), counted and logged
// like the others. Nodes' clocks must agree within FRESH_MS (NTP).
//
// What it does not give: secrecy (frames travel in the clear; use the backend's TLS and
// auth for that). See docs/cluster-secret.md.

import { createSecretKey, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { logLimited } from '../log';
import type { MetricsSink } from '../metrics/types';
import type { Transport } from './transport';
import { isPublishFrom, isSigned, openFrame, signedBody, signFrame, stamper, type Stamp } from './wire';

/** A signed frame's clock may differ from ours by this much (ms). */
export const FRESH_MS = 30_000;
/** Sequence numbers per sender remembered (a bitmap): one further behind its newest is taken as replayed. */
export const SEQ_WINDOW = 1 << 16;

export interface SigningDeps {
  log: Logger;
  metrics: MetricsSink;
  /**
   * This node's id: its own publishes, echoed by the backend, are dropped before the check
   * (the cluster drops them unread anyway, cluster.ts; a forged one is dropped the same).
   */
  self: string;
  /** The clock (tests). */
  now?: () => number;
}

/** `tx` with every frame signed and checked with `secret` (null: signed frames refused, the rest as is). */
export function signedTransport(tx: Transport, secret: string | null, deps: SigningDeps): Transport {
  const { log, metrics, self } = deps;
  const reject = (reason: keyof typeof WHY, subject: string) => {
    metrics.inc('adapter_frames_rejected_total', { reason });
    logLimited(log, 'warn', { subject, reason }, WHY[reason]);
  };
  const key: KeyObject | null = secret === null ? null : createSecretKey(Buffer.from(secret, 'utf8'));
  // the rest goes to tx as is (called on tx: its state lives there)
  const wrapped = (publish: Transport['publish'], subscribe: Transport['subscribe']): Transport => ({
    name: tx.name, ordered: tx.ordered, where: tx.where, publish, subscribe,
    connect: (ms) => tx.connect(ms), unsubscribe: (subject) => tx.unsubscribe(subject), isUp: () => tx.isUp(), onState: (fn) => tx.onState(fn), close: () => tx.close(),
    ...(tx.renew ? { renew: () => tx.renew!() } : {}),
  });
  if (key === null) {
    return wrapped((subject, data) => tx.publish(subject, data), (subject, handler) => tx.subscribe(subject, (data) => {
      if (isSigned(data)) reject('signed', subject);
      else handler(data);
    }));
  }
  const stamp = stamper(deps.now);
  const fresh = replayGuard(deps.now ?? Date.now);
  return wrapped((subject, data) => tx.publish(subject, signFrame(key, subject, data, stamp())), (subject, handler) => tx.subscribe(subject, (data) => {
    if (isPublishFrom(signedBody(data), self)) return;
    const opened = openFrame(key, subject, data);
    if (typeof opened === 'string') return reject(opened, subject);
    const refused = fresh(opened.stamp);
    if (refused !== null) reject(refused, subject);
    else handler(opened.frame);
  }));
}

const WHY = {
  signed: 'cluster: dropped a signed frame: another node has adapter.cluster_secret set and this one has none',
  unsigned: 'cluster: dropped a frame without a signature (adapter.cluster_secret is set here): a node without the secret, or someone else, publishes on the cluster prefix',
  bad_signature: 'cluster: dropped a frame with a wrong signature: a node with another adapter.cluster_secret, or someone else, publishes on the cluster prefix',
  stale: `cluster: dropped a signed frame stamped more than ${FRESH_MS / 1000} s from this node's clock: a replayed old frame, or node clocks apart (run NTP)`,
  replayed: 'cluster: dropped a signed frame already received (same sender and sequence number): a captured frame published again on the cluster prefix',
} as const;

interface Seen { top: number; bits: Uint32Array; at: number }

/**
 * Whether a stamp is fresh and new: null, else why not. Per sender, the newest sequence
 * number and which of the SEQ_WINDOW before it were received. A sender silent for twice
 * FRESH_MS is forgotten: any frame of it that could still be fresh is newer than that.
 * A frame stamped before the guard began is stale too: it was sent before this node
 * listened, so only a replay can bring it (a restarted node would otherwise take the
 * frames of the last FRESH_MS once more).
 */
export function replayGuard(now: () => number): (s: Stamp) => 'stale' | 'replayed' | null {
  const senders = new Map<string, Seen>();
  const began = now();
  let prunedAt = began;
  return (s) => {
    const t = now();
    if (!(Math.abs(t - s.ms) <= FRESH_MS) || s.ms < began) return 'stale';
    if (t - prunedAt > FRESH_MS) {
      prunedAt = t;
      for (const [id, e] of senders) if (t - e.at > 2 * FRESH_MS) senders.delete(id);
    }
    let e = senders.get(s.sender);
    if (e === undefined) senders.set(s.sender, e = { top: 0, bits: new Uint32Array(SEQ_WINDOW / 32), at: t });
    const seq = s.seq;
    if (!Number.isSafeInteger(seq) || seq <= e.top - SEQ_WINDOW) return 'replayed';
    if (seq > e.top) {
      // the slots between the old top and the new one are free again
      if (seq - e.top >= SEQ_WINDOW) e.bits.fill(0);
      else for (let q = e.top + 1; q < seq; q++) e.bits[(q % SEQ_WINDOW) >>> 5] &= ~(1 << (q & 31));
      e.top = seq;
    } else if (e.bits[(seq % SEQ_WINDOW) >>> 5] & (1 << (seq & 31))) {
      return 'replayed';
    }
    e.bits[(seq % SEQ_WINDOW) >>> 5] |= 1 << (seq & 31);
    e.at = t;
    return null;
  };
}
