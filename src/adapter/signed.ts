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
// What it does not give: secrecy (frames travel in the clear; use the backend's TLS and
// auth for that) and freshness (a captured frame replayed on its subject checks fine).
// See docs/cluster-secret.md.

import { createSecretKey, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { logLimited } from '../log';
import type { MetricsSink } from '../metrics/types';
import type { Transport } from './transport';
import { isPublishFrom, isSigned, openFrame, signedBody, signFrame } from './wire';

export interface SigningDeps {
  log: Logger;
  metrics: MetricsSink;
  /**
   * This node's id: its own publishes, echoed by the backend, are dropped before the check
   * (the cluster drops them unread anyway, cluster.ts; a forged one is dropped the same).
   */
  self: string;
}

/** `tx` with every frame signed and checked with `secret` (null: signed frames refused, the rest as is). */
export function signedTransport(tx: Transport, secret: string | null, deps: SigningDeps): Transport {
  const { log, metrics, self } = deps;
  const reject = (reason: 'unsigned' | 'bad_signature' | 'signed', subject: string) => {
    metrics.inc('adapter_frames_rejected_total', { reason });
    const why = reason === 'signed'
      ? 'cluster: dropped a signed frame: another node has adapter.cluster_secret set and this one has none'
      : reason === 'unsigned'
        ? 'cluster: dropped a frame without a signature (adapter.cluster_secret is set here): a node without the secret, or someone else, publishes on the cluster prefix'
        : 'cluster: dropped a frame with a wrong signature: a node with another adapter.cluster_secret, or someone else, publishes on the cluster prefix';
    logLimited(log, 'warn', { subject, reason }, why);
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
  return wrapped((subject, data) => tx.publish(subject, signFrame(key, subject, data)), (subject, handler) => tx.subscribe(subject, (data) => {
    if (isPublishFrom(signedBody(data), self)) return;
    const frame = openFrame(key, subject, data);
    if (typeof frame === 'string') reject(frame, subject);
    else handler(frame);
  }));
}
