// history.driver `redis` / `redis-cluster`: every node numbers and stores ONE sequence per
// history channel, in Redis, so a client that reconnects to another node resumes exactly
// (docs/protocol.md "History, rewind and recovery"; docs/history.md "Redis drivers").
//
//   publish  a shard runs PUBLISH_LUA: the channel's next serial (HSET in its meta hash),
//            the message appended to its list (trimmed to `size`, TTLs set), and the
//            numbered message PUBLISHed (SPUBLISH on a Redis Cluster) on the channel's
//            subject (one of HISTORY_SUBJECTS) — all in one script, so the subject carries a
//            channel's messages in serial order and every subscriber of it sees that one order.
//   deliver  a shard subscribes to a subject while it has subscriptions of a channel on it
//            (one connection per shard; history/redis-subjects.ts: by interest, the first
//            subscriber waits for Redis's confirmation) and hands each numbered message to
//            deliver() (history/shard.ts) when it has subscribers of the channel. No hop
//            through the owner shard, the primary or the cluster adapter: the adapter does
//            not carry history channels.
//   ask      a subscription's rewind / resume runs READ_LUA (history/redis-scripts.ts), which publishes its answer (the
//            position S and the stored messages) as a marker on the same subject: the marker
//            reaches the asking shard behind every message ≤ S and ahead of every one > S,
//            and its answer runs synchronously in that turn (no gap, no duplicate).
//   page     REST history: READ_LUA without a marker, answered directly.
//
// Keys share one hash tag per bucket (a Redis Cluster needs the script's keys and its
// shard channel in one slot): `<key_prefix>hist:{<key_prefix>hist.<b>}:m:<app>:<channel>`
// (meta: epoch, last serial, Redis run_id) and `…:l:…` (the list, one entry per message,
// "<time_ms> <frame>", consecutive serials ending at the last one). A plain Redis has one
// bucket; a cluster BUCKETS_CLUSTER, spread over its masters. Subject k is
// `<key_prefix>hist:{<key_prefix>hist.<k % buckets>}:<k>`, in its channels' slot.
//
// Epochs: the meta holds the run_id of the Redis server that numbered it. A restart (or a
// failover to a replica) changes the run_id; the next script then starts a new epoch and
// drops the list, since Redis persistence can lose the last writes and a serial must never
// be given twice in one epoch. A missing meta (expired, flushed) also starts a new epoch.
// Reading a channel that has no meta writes nothing: its epoch is derived (redis-scripts.ts),
// so subscribes to names nobody publishes on leave no key.
//
// Redis unreachable: a publish to a history channel throws HistoryUnavailableError at once
// (the API answers 503, a client event gets pusher:error; nothing is delivered or stored);
// a script that fails after it was sent (a hung Redis: the command timeout) is logged and
// counted, its message was neither stored nor delivered anywhere.

import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ChannelHistorySetting, Config } from '../config/types';
import { logLimited } from '../log';
import type { MetricsSink } from '../metrics/types';
import { isCluster, redisClient, redisClusterClient, redisClusterWhere, redisUnreachable, redisWhere, whenReady } from '../redis/client';
import type { HistPageReply, HistSubReply } from '../bus/messages';
import { answerSub, type StoredView } from './owner';
import { PUBLISH_LUA, READ_LUA } from './redis-scripts';
import { HISTORY_SUBJECTS, SubjectPlane, type NumberedSubjects } from './redis-subjects';
import type { HistPub, HistQuestion } from './shard';
import { HistoryUnavailableError, type PageQuery, type StoredMessage } from './types';

/** Buckets (hash tags) of a Redis Cluster: spread over its masters. Divides HISTORY_SUBJECTS. */
export const BUCKETS_CLUSTER = 16;
/** ms a subscription waits for its marker before it is answered `unavailable`. */
export const ASK_TIMEOUT_MS = 3000;

type Client = Redis | Cluster;
type Scripted = Client & {
  rcHistPub(meta: string, list: string, ...args: (string | number)[]): Promise<number>;
  rcHistRead(meta: string, list: string, ...args: (string | number)[]): Promise<[string, number, number, string[]]>;
};

/** A snapshot of a channel: its position and the entries read, serial `lo` first. */
interface Snapshot { epoch: string; serial: number; lo: number; entries: string[] }

export interface RedisHistoryDeps {
  config: Pick<Config, 'history' | 'database'>;
  driver: 'redis' | 'redis-cluster';
  /** A history channel's setting (null: it has none any more). */
  setting(app: string, channel: string): ChannelHistorySetting | null;
  /** Whether this shard has subscribers of the channel (its interest bit). */
  wanted(app: string, channel: string): boolean;
  /** A numbered message for this shard's subscribers (history/shard.ts deliver). */
  /**
   * Listening again after a break (Redis restarted, the connection dropped): messages may
   * have been numbered meanwhile that never reached this shard (history/shard.ts catchUp).
   */
  missed?(): void;
  deliver(h: { type: 'hist'; app: string; channel: string; except: string; epoch: string; serial: number; message: string; tags?: string }): void;
  log: Logger;
  metrics: MetricsSink;
  now?: () => number;
}

function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** A channel's subject among HISTORY_SUBJECTS; its key tag is the subject's modulo the buckets (HISTORY_SUBJECTS is a multiple of them). */
export function subjectIndexOf(app: string, channel: string): number {
  return fnv(app + ':' + channel) % HISTORY_SUBJECTS;
}

/** The tags part of a stored entry (PUBLISH_LUA): '' without tags. Lengths in UTF-16 units, as entryOf reads them. */
export const tagsPrefix = (tags: string | undefined): string => (tags === undefined ? '' : `T${tags.length} ${tags}`);

/** A stored entry read back: `<now ms> <frame>` or `<now ms> T<n> <tags><frame>`. */
export function entryOf(e: string): { timeMs: number; message: string; tags?: string } {
  const sp = e.indexOf(' ');
  const timeMs = Number(e.slice(0, sp));
  if (e.charCodeAt(sp + 1) !== 0x54) return { timeMs, message: e.slice(sp + 1) }; // 'T'
  const sp2 = e.indexOf(' ', sp + 2);
  const end = sp2 + 1 + Number(e.slice(sp + 2, sp2));
  return { timeMs, tags: e.slice(sp2 + 1, end), message: e.slice(end) };
}

function storedOf(s: Snapshot, i: number): StoredMessage {
  return { serial: s.lo + i, ...entryOf(s.entries[i]) };
}

/** The snapshot's messages that are not expired (the oldest go first, so they are a prefix). */
function alive(s: Snapshot, ttlMs: number, now: number): { skipped: number; items: StoredMessage[] } {
  const all = s.entries.map((_, i) => storedOf(s, i));
  let skipped = 0;
  while (skipped < all.length && all[skipped].timeMs + ttlMs <= now) skipped++;
  return { skipped, items: all.slice(skipped) };
}

export class RedisHistory {
  private readonly cmd: Scripted;
  private readonly sub: Client;
  private readonly where: string;
  private readonly prefix: string;
  private readonly buckets: number;
  private readonly publishCommand: 'publish' | 'spublish';
  /** Per instance: epochs this one starts never repeat another's. */
  private readonly tag = randomBytes(4).toString('hex');
  private epochSeq = 0;
  /** This shard's name in markers. */
  private readonly me = randomBytes(6).toString('hex');
  private nextReq = 1;
  private readonly pending = new Map<number, { q: HistQuestion; answer(r: HistSubReply): void; failed(err: Error): void; timer: NodeJS.Timeout }>();
  private readonly now: () => number;
  private closed = false;
  private readonly plane: SubjectPlane;
  private readonly onListening: (() => void)[] = [];
  /** The subscriber has listened once: a later listen follows a break. */
  private listenedBefore = false;
  /** Listening again after a break, and its subscribers not told yet (caughtUp). */
  private missedSome = false;
  /** While numbered() runs: the publishes' outcomes. */
  private collecting: Promise<void>[] | null = null;

  constructor(private readonly d: RedisHistoryDeps) {
    this.now = d.now ?? Date.now;
    const role = { name: 'history', queue: false };
    const subRole = { name: 'history-sub', queue: true, commandTimeoutMs: null, ownResubscribe: true };
    if (d.driver === 'redis-cluster') {
      const c = d.config.database.redis_cluster;
      this.cmd = redisClusterClient(c, role) as Scripted;
      this.sub = redisClusterClient(c, { ...subRole, sharded: true });
      this.prefix = c.key_prefix;
      this.where = redisClusterWhere(c);
      this.buckets = BUCKETS_CLUSTER;
      this.publishCommand = 'spublish';
    } else {
      const c = d.config.database.redis;
      this.cmd = redisClient(c, role) as Scripted;
      this.sub = redisClient(c, subRole);
      this.prefix = c.key_prefix;
      this.where = redisWhere(c);
      this.buckets = 1;
      this.publishCommand = 'publish';
    }
    this.cmd.defineCommand('rcHistPub', { numberOfKeys: 2, lua: PUBLISH_LUA });
    this.cmd.defineCommand('rcHistRead', { numberOfKeys: 2, lua: READ_LUA });
    let down = false;
    // ioredis emits 'error' for every failed attempt: without a listener it would kill the thread
    const onError = (err: Error) => {
      if (!down) d.log.warn({ err: err.message, redis: this.where }, 'history: Redis unreachable; publishes to history channels answer 503 until it is back');
      down = true;
    };
    this.cmd.on('error', onError);
    this.sub.on('error', onError);
    this.cmd.on('ready', () => {
      if (down) d.log.info({ redis: this.where }, 'history: Redis reachable again');
      down = false;
      this.caughtUp();
    });
    const onMessage = (_subject: Buffer, payload: Buffer) => {
      try {
        this.received(payload);
      } catch (err) {
        logLimited(d.log, 'error', { err }, 'history: a numbered message from Redis could not be handled');
      }
    };
    if (isCluster(this.sub)) this.sub.on('smessageBuffer', onMessage);
    else this.sub.on('messageBuffer', onMessage);
    // by interest: a subject is subscribed while this shard has a subscription on it (history/redis-subjects.ts)
    this.plane = new SubjectPlane({
      sub: this.sub, where: this.where, log: d.log, metrics: d.metrics,
      name: (k) => this.subject(k),
      subjectOf: (app, channel) => (d.setting(app, channel) === null ? -1 : subjectIndexOf(app, channel)),
      onListening: () => {
        for (const w of this.onListening.splice(0)) w();
        // listening again after a break: what was numbered meanwhile is fetched (history/shard.ts catchUp)
        if (this.listenedBefore) this.missedSome = true;
        this.listenedBefore = true;
        this.caughtUp();
      },
    });
  }

  /** The subjects of the numbered messages, by interest (ws/subscribe.ts holds them). */
  get subjects(): NumberedSubjects & Pick<SubjectPlane, 'isReady' | 'subscribed'> {
    return this.plane;
  }

  private tagOf(b: number): string {
    return `{${this.prefix}hist.${b}}`;
  }

  /** Subject k's name: in the slot of its channels' keys (bucket k % buckets). */
  subject(k: number): string {
    return `${this.prefix}hist:${this.tagOf(k % this.buckets)}:${k}`;
  }

  /** [meta key, list key, subject] of a channel (one slot). A channel name has no ':'. */
  private keys(app: string, channel: string): [string, string, string] {
    const k = subjectIndexOf(app, channel);
    const base = `${this.prefix}hist:${this.tagOf(k % this.buckets)}`;
    return [`${base}:m:${app}:${channel}`, `${base}:l:${app}:${channel}`, this.subject(k)];
  }

  private newEpoch(): string {
    return this.tag + (++this.epochSeq).toString(36);
  }

  private unavailable(what: string): HistoryUnavailableError {
    return new HistoryUnavailableError(`history store unavailable: history.driver ${this.d.driver} cannot reach Redis at ${this.where}; ${what}`);
  }

  /** After a break in the subscription: once Redis can be asked, the shard fetches what it missed (RedisHistoryDeps.missed). */
  private caughtUp(): void {
    if (!this.missedSome || !this.isUp()) return;
    this.missedSome = false;
    this.d.missed?.();
  }

  /** Whether Redis can be asked now (GET /up/{appId}). */
  isUp(): boolean {
    return this.cmd.status === 'ready' && this.sub.status === 'ready' && this.plane.listening;
  }

  ready(timeoutMs: number): Promise<void> {
    const fail = (c: Client) => () => this.unavailable(redisUnreachable(c, this.where, timeoutMs));
    const listening = new Promise<void>((resolve, reject) => {
      if (this.plane.listening) return resolve();
      const timer = setTimeout(() => reject(this.unavailable(`not subscribed to the numbered messages within ${timeoutMs} ms`)), timeoutMs);
      this.onListening.push(() => { clearTimeout(timer); resolve(); });
    });
    return Promise.all([whenReady(this.cmd, timeoutMs, fail(this.cmd)), whenReady(this.sub, timeoutMs, fail(this.sub)), listening]).then(() => undefined);
  }

  /** Numbers, stores and publishes one message of a history channel; throws HistoryUnavailableError when Redis is down. */
  publish(m: HistPub): void {
    const s = this.d.setting(m.app, m.channel);
    if (s === null) return;
    if (!this.isUp()) throw this.unavailable('the message was not published');
    const [meta, list, subject] = this.keys(m.app, m.channel);
    const header = JSON.stringify([m.app, m.channel, m.except, m.tags ?? null]);
    const done = this.cmd.rcHistPub(meta, list, this.newEpoch(), this.d.config.history.meta_ttl * 1000, s.size, s.ttl * 1000, this.now(), this.publishCommand, subject, header, m.message, tagsPrefix(m.tags))
      .then(() => undefined, (err: Error) => {
        this.d.metrics.inc('history_store_errors_total', { op: 'publish' });
        logLimited(this.d.log, 'error', { err: err.message, channel: m.channel, redis: this.where }, 'history: a message to a history channel was not numbered: neither stored nor delivered');
        throw this.unavailable(`the message was not numbered (${err.message})`);
      });
    done.catch(() => undefined); // a client event has nobody to answer: logged and counted above
    this.collecting?.push(done);
  }

  /**
   * Runs `publish` (the API's publisher call) and returns what its history channel messages
   * wait for: resolved once Redis numbered every one of them (stored and on their way to the
   * subscribers), rejected with HistoryUnavailableError when one was not; null when it
   * published on no history channel. So a 200 means numbered, and an API publish answered
   * 200 before the next one is sent is numbered before it, whichever node takes either.
   */
  numbered(publish: () => void): Promise<void> | null {
    const outer = this.collecting;
    const mine: Promise<void>[] = [];
    this.collecting = mine;
    try {
      publish();
    } finally {
      this.collecting = outer;
    }
    return mine.length === 0 ? null : Promise.all(mine).then(() => undefined);
  }

  /** A subscription's question: answered when its marker comes back through the numbered stream. */
  ask(q: HistQuestion, answer: (r: HistSubReply) => void, failed: (err: Error) => void): void {
    if (!this.isUp()) {
      queueMicrotask(() => failed(this.unavailable('no rewind or recovery')));
      return;
    }
    const req = this.nextReq++;
    const timer = setTimeout(() => this.settle(req)?.failed(this.unavailable(`no answer within ${ASK_TIMEOUT_MS} ms`)), ASK_TIMEOUT_MS);
    timer.unref();
    this.pending.set(req, { q, answer, failed, timer });
    const [meta, list, subject] = this.keys(q.app, q.channel);
    const resume = q.recover;
    const max = this.d.config.history.max_recover;
    const args = resume === null ? ['b', 1, -1, q.rewind] : ['f', resume.serial + 1, -1, max];
    // the marker comes back on the channel's subject: read once this shard listens to it
    // (the subscription holds it); what is numbered meanwhile is at or below the position read
    this.plane.after(subjectIndexOf(q.app, q.channel), () => {
      if (!this.pending.has(req)) return;
      this.cmd.rcHistRead(meta, list, this.newEpoch(), this.d.config.history.meta_ttl * 1000, ...args, this.publishCommand, subject, `${this.me}\n${req}`, q.cap ?? 0)
        .catch((err: Error) => this.settle(req)?.failed(err));
    });
  }

  private settle(req: number) {
    const p = this.pending.get(req);
    if (p === undefined) return undefined;
    this.pending.delete(req);
    clearTimeout(p.timer);
    return p;
  }

  /**
   * Keeps a channel's numbering alive while this shard has subscriptions with positions on
   * it: its meta key's TTL back to meta_ttl (nothing if it is gone: the next read or publish
   * starts a new epoch, and they are told). Best effort: a failure is counted, the next touch retries.
   */
  touch(app: string, channel: string): void {
    if (this.cmd.status !== 'ready') return;
    const [meta] = this.keys(app, channel);
    this.cmd.pexpire(meta, this.d.config.history.meta_ttl * 1000).catch(() => this.d.metrics.inc('history_store_errors_total', { op: 'touch' }));
  }

  /** One page of REST history. */
  async page(app: string, channel: string, q: Omit<PageQuery, 'before'> & { before: number | null }): Promise<HistPageReply> {
    if (this.cmd.status !== 'ready') throw this.unavailable('no history page');
    const [meta, list] = this.keys(app, channel);
    const before = q.before === null ? -1 : q.before - 1;
    const [epoch, serial, lo, entries] = await this.cmd.rcHistRead(meta, list, this.newEpoch(), this.d.config.history.meta_ttl * 1000,
      q.direction === 'forwards' ? 'f' : 'b', q.after + 1, before, q.limit + 1, '', '', '', 0);
    const s = this.d.setting(app, channel);
    const snap: Snapshot = { epoch, serial: Number(serial), lo: Number(lo), entries };
    let items = s === null ? [] : alive(snap, s.ttl * 1000, this.now()).items;
    if (q.direction === 'backwards') items = items.reverse();
    return { epoch, items: items.slice(0, q.limit), more: items.length > q.limit };
  }

  private received(buf: Buffer): void {
    if (buf[0] === 0x70) return this.onNumbered(buf); // 'p'
    if (buf[0] === 0x72) return this.marker(buf); // 'r'
  }

  /** `p\n<epoch>\n<serial>\n<header json>\n<frame>` */
  private onNumbered(buf: Buffer): void {
    const text = buf.toString('utf8');
    const a = text.indexOf('\n', 2);
    const b = text.indexOf('\n', a + 1);
    const c = text.indexOf('\n', b + 1);
    const [app, channel, except, tags] = JSON.parse(text.slice(b + 1, c)) as [string, string, string, string | null];
    if (!this.d.wanted(app, channel)) return;
    const h: Parameters<RedisHistoryDeps['deliver']>[0] = { type: 'hist', app, channel, except, epoch: text.slice(2, a), serial: Number(text.slice(a + 1, b)), message: text.slice(c + 1) };
    if (tags !== null) h.tags = tags;
    this.d.deliver(h);
  }

  /** `r\n<shard>\n<req>\n<epoch>\n<S>\n<lo>\n` then `<bytes>:<entry>` per entry (byte lengths). */
  private marker(buf: Buffer): void {
    let at = 2;
    const line = (): string => {
      const end = buf.indexOf(0x0a, at);
      const s = buf.toString('utf8', at, end);
      at = end + 1;
      return s;
    };
    if (line() !== this.me) return; // another shard's answer
    const p = this.settle(Number(line()));
    if (p === undefined) return; // timed out meanwhile
    const snap: Snapshot = { epoch: line(), serial: Number(line()), lo: Number(line()), entries: [] };
    while (at < buf.length) {
      const colon = buf.indexOf(0x3a, at);
      const n = Number(buf.toString('latin1', at, colon));
      snap.entries.push(buf.toString('utf8', colon + 1, colon + 1 + n));
      at = colon + 1 + n;
    }
    p.answer(this.reply(p.q, snap));
  }

  private reply(q: HistQuestion, snap: Snapshot): HistSubReply {
    const s = this.d.setting(q.app, q.channel);
    const ttlMs = (s?.ttl ?? 0) * 1000;
    const now = this.now();
    const view: StoredView = {
      last: (n) => alive(snap, ttlMs, now).items.slice(-n),
      since: (after) => {
        if (after >= snap.serial) return [];
        const a = alive(snap, ttlMs, now);
        // N+1 must be stored and not expired; the snapshot holds N+1 … S from lo
        if (snap.lo !== after + 1 || a.skipped > 0) return null;
        return a.items;
      },
    };
    return answerSub(q, s !== null, () => ({ epoch: snap.epoch, serial: snap.serial }), view, this.d.config.history.max_recover);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.plane.close();
    for (const req of [...this.pending.keys()]) this.settle(req)?.failed(this.unavailable('the server is stopping'));
    await Promise.allSettled([this.cmd.quit(), this.sub.quit()]);
    this.cmd.disconnect();
    this.sub.disconnect();
  }
}
