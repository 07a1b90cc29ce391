// The numbered messages of history channels by interest (history.driver redis /
// redis-cluster): a channel's numbered messages and markers travel on one of
// HISTORY_SUBJECTS subjects, and a shard subscribes to a subject only while it has a
// subscription of a channel on it (and HISTORY_SUBJECT_LINGER_MS after the last one left,
// so that churn does not thrash). A shard, and a node, with no subscriber of a history
// channel receives none of its messages.
//
//   subscribe on a history channel (ws/subscribe.ts):
//     hold(k) ─▶ ready[k]? ─yes─▶ subscription_succeeded (and its rewind / recovery question)
//                  └─no─▶ SUBSCRIBE k confirmed by Redis ─▶ subscription_succeeded …
//
// So a message numbered after subscription_succeeded reaches the shard (Redis had the
// subscription before the client was told), a rewind is read right after
// subscription_succeeded as on a subject already held, and a marker is only published on
// a subject the shard listens to (history/redis.ts ask also waits for it: a catch-up). The subscriber connection is one per
// shard: a SUBSCRIBE sent after an UNSUBSCRIBE of the same subject is answered after it,
// so a subject dropped by the sweep and held again at once ends subscribed.
//
// A reconnect (Redis restarted, the connection dropped) marks every subject not ready and
// subscribes again exactly the held ones; `onListening` runs once they are confirmed
// (history/redis.ts then fetches what was numbered meanwhile).

import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { logLimited } from '../log';
import type { MetricsSink } from '../metrics/types';
import { isCluster } from '../redis/client';

/** Subjects of the numbered messages (per plain Redis, and per Redis Cluster). */
export const HISTORY_SUBJECTS = 256;
/** A subject without subscribers on this shard is kept this long before UNSUBSCRIBE. */
export const HISTORY_SUBJECT_LINGER_MS = 5000;
/** The longest a first subscriber of a subject waits for Redis's confirmation; then it goes on (its question is answered `unavailable` if Redis is down). */
export const HISTORY_SUBJECT_WAIT_MS = 2000;
const SWEEP_MS = 1000;

interface Subject {
  ready: boolean;
  /** Subscriptions waiting for `ready` (after()). */
  waiters: (() => void)[];
  /** Since when no subscription of this shard holds it (null: held). */
  idleSince: number | null;
}

/** What ws/subscribe.ts uses: the subject a subscription holds, and the wait for it. */
export interface NumberedSubjects {
  /** Holds the subject of a channel; -1 when the channel has no history (nothing held). */
  hold(app: string, channel: string): number;
  release(k: number): void;
  /** Runs `then` once subject k is subscribed (at once when it is; after HISTORY_SUBJECT_WAIT_MS at most). */
  after(k: number, then: () => void): void;
}

export class SubjectPlane implements NumberedSubjects {
  private readonly holds = new Int32Array(HISTORY_SUBJECTS);
  private readonly subjects = new Map<number, Subject>();
  /** Changes with every (re)connect and break: a confirmation of an older connection is ignored. */
  private gen = 0;
  /** The held subjects are all confirmed on the current connection. */
  listening = false;
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly d: {
    sub: Redis | Cluster;
    /** Subject k's name. */
    name(k: number): string;
    /** The subject of a channel with history; -1 without (history/redis.ts). */
    subjectOf(app: string, channel: string): number;
    /** The held subjects are confirmed after a (re)connect. */
    onListening(): void;
    where: string;
    log: Logger;
    metrics: MetricsSink;
  }) {
    const sub = d.sub;
    sub.on('ready', () => this.listen());
    for (const ev of ['close', 'end', 'reconnecting']) sub.on(ev, () => this.broken());
    this.timer = setInterval(() => this.sweep(), SWEEP_MS);
    this.timer.unref();
  }

  hold(app: string, channel: string): number {
    const k = this.d.subjectOf(app, channel);
    if (k < 0) return -1;
    this.holds[k]++;
    const s = this.subjects.get(k);
    if (s !== undefined) {
      s.idleSince = null;
      return k;
    }
    this.subjects.set(k, { ready: false, waiters: [], idleSince: null });
    this.gauge();
    if (this.d.sub.status === 'ready') void this.subscribe([k]).catch(() => undefined); // else: listen() subscribes it on connect
    return k;
  }

  release(k: number): void {
    if (this.holds[k] <= 0) return;
    if (--this.holds[k] === 0) {
      const s = this.subjects.get(k);
      if (s !== undefined) s.idleSince = Date.now();
    }
  }

  after(k: number, then: () => void): void {
    const s = this.subjects.get(k);
    if (s === undefined || s.ready) return then();
    let done = false;
    const go = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      then();
    };
    const timer = setTimeout(go, HISTORY_SUBJECT_WAIT_MS);
    s.waiters.push(go);
  }

  /** Whether subject k is subscribed now (tests, /up). */
  isReady(k: number): boolean {
    return this.subjects.get(k)?.ready === true;
  }

  /** The subjects subscribed now. */
  subscribed(): number[] {
    return [...this.subjects].filter(([, s]) => s.ready).map(([k]) => k);
  }

  private gauge(): void {
    this.d.metrics.set('history_subjects_subscribed', undefined, this.subjects.size);
  }

  private subscribe(ks: number[]): Promise<void> {
    const gen = this.gen;
    const sub = this.d.sub;
    const names = ks.map((k) => this.d.name(k));
    const sent = isCluster(sub) ? Promise.all(names.map((n) => sub.ssubscribe(n))) : sub.subscribe(...names);
    return sent.then(() => {
      if (gen !== this.gen || sub.status !== 'ready') return;
      for (const k of ks) {
        const s = this.subjects.get(k);
        if (s === undefined || s.ready) continue;
        s.ready = true;
        for (const w of s.waiters.splice(0)) w();
      }
      this.confirmed(gen);
    }, (err: Error) => {
      if (this.closed || gen !== this.gen) return;
      logLimited(this.d.log, 'error', { err: err.message, redis: this.d.where }, 'history: could not subscribe to the numbered messages; trying again in 1 s');
      // refused while connected (NOPERM: an ACL that denies the channels): asked again
      // until Redis accepts, not only at the next reconnect
      setTimeout(() => {
        if (this.closed || gen !== this.gen || sub.status !== 'ready') return;
        const left = ks.filter((k) => this.subjects.get(k)?.ready === false);
        if (left.length > 0) void this.subscribe(left).catch(() => undefined);
      }, 1000).unref();
      throw err;
    });
  }

  private listen(): void {
    this.broken();
    const held = [...this.subjects.keys()];
    if (held.length === 0) this.confirmed(this.gen);
    else void this.subscribe(held).catch(() => undefined); // retried by subscribe()
  }

  /** Listening again once every held subject is confirmed on the current connection. */
  private confirmed(gen: number): void {
    if (this.listening || gen !== this.gen || this.d.sub.status !== 'ready') return;
    for (const s of this.subjects.values()) if (!s.ready) return;
    this.listening = true;
    this.d.onListening();
  }

  private broken(): void {
    this.gen++;
    this.listening = false;
    for (const s of this.subjects.values()) s.ready = false;
  }

  sweep(now = Date.now()): void {
    let dropped = false;
    for (const [k, s] of this.subjects) {
      if (this.holds[k] > 0 || s.idleSince === null || now - s.idleSince < HISTORY_SUBJECT_LINGER_MS) continue;
      this.subjects.delete(k);
      dropped = true;
      for (const w of s.waiters.splice(0)) w();
      if (this.d.sub.status !== 'ready') continue; // a reconnect subscribes the held ones only
      const sub = this.d.sub;
      const name = this.d.name(k);
      (isCluster(sub) ? sub.sunsubscribe(name) : sub.unsubscribe(name)).catch((err: Error) => {
        logLimited(this.d.log, 'warn', { err: err.message, redis: this.d.where }, 'history: unsubscribing a numbered subject failed');
      });
    }
    if (dropped) this.gauge();
  }

  close(): void {
    this.closed = true;
    this.gen++;
    clearInterval(this.timer);
  }
}
