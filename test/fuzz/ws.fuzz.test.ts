// test-modes: workers 4 (the parsers and their answers are the same on every shard; the check that every shard still accepts connections spans 4)
// WebSocket fuzz: random and mutated frames on a handful of
// parallel connections, plus random connection URLs. Bounded and seeded: FUZZ_SEED
// overrides the seed, FUZZ_SCALE scales the case count.
//
// Expectations:
// - the server never crashes (a crash of a shard aborts this process; afterwards every
//   shard is still accepting connections);
// - every frame the server sends is a JSON object; every error is a well-formed
//   pusher:error {code, message} with a documented code, or a pusher:subscription_error
//   {type, error, status} with a documented type and status;
// - a connection is closed only with a documented code: 1009 for a frame over
//   WEBSOCKET_MAX_PAYLOAD_KB, a 4xxx protocol code, or (recorded) whatever follows a
//   frame the client broke (a text frame that is not UTF-8, a frame past uWS's cut);
// - afterwards a fresh client connects, subscribes and receives a published event, client
//   events still flow, and GET /up answers.

import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { channelAuth, userAuth } from '../../src/protocol/hmac';
import { metric } from '../faults/api';
import { getJson, livePrefixes } from './after';
import { FuzzReport } from '../helpers/fuzz-report';
import { APP, RawClient, WORKERS, startServer, type TestServer } from '../helpers/server';
import {
  NASTY_NUMBERS, NASTY_STRINGS, Rng, clip, deepJson, encode, fuzzCases, fuzzSeed, junkValue, mutateObject, mutateText,
  randChannel, randJson, randName, randString,
} from './gen';

const SEED = fuzzSeed(0x0c0ffee1);
/** Frames in total over all connections (plus CONNECT_CASES connection attempts). */
const FRAME_CASES = fuzzCases(9600);
const CONNECT_CASES = fuzzCases(400);
const CONNECTIONS = 6;
const BATCH = 40;
const MAX_PAYLOAD = 64 * 1024; // websocket.max_payload_kb (the default, set explicitly below)

const DISABLED = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };
const ORIGIN = { id: 'orig-id', key: 'orig-key', secret: 'orig-secret', allowed_origins: ['https://ok.example'] };

/** Documented pusher:error codes (the protocol "Error codes"). */
const ERROR_CODES = new Set([4000, 4001, 4003, 4004, 4009, 4100, 4200, 4201, 4301]);
/** Close codes a protocol decision may use. */
const PROTOCOL_CLOSE = new Set([4001, 4003, 4004, 4009, 4100, 4200, 4201]);
const SUB_ERROR_STATUS: Record<string, Set<number>> = {
  AuthError: new Set([401]),
  LimitReached: new Set([4100, 4301, 4009]),
  InvalidChannel: new Set([4009]),
  InvalidFilter: new Set([4000]),
  // a subscription's `delta` that is none of the accepted forms (README, Delta compression)
  InvalidDelta: new Set([4000]),
};
const SECRETS = [APP.secret, DISABLED.secret, ORIGIN.secret];

// ---------------------------------------------------------------------------------------
// What the server sends: every frame checked as it arrives.

/** null when `text` is a well-formed server frame, else what is wrong with it. */
function checkServerFrame(text: string): { problem: string | null; event?: string; frame?: any } {
  let f: any;
  try {
    f = JSON.parse(text);
  } catch {
    return { problem: 'server sent a frame that is not JSON' };
  }
  if (f === null || typeof f !== 'object' || Array.isArray(f)) return { problem: 'server frame is not a JSON object' };
  if (typeof f.event !== 'string' || f.event === '') return { problem: 'server frame has no string "event"' };
  for (const s of SECRETS) if (text.includes(s)) return { problem: 'server frame contains an app secret' };
  if (f.channel !== undefined && typeof f.channel !== 'string') return { problem: '"channel" is not a string' };
  const ev: string = f.event;
  if (ev === 'pusher:error') {
    const d = f.data;
    if (d === null || typeof d !== 'object') return { problem: 'pusher:error without a data object' };
    if (!ERROR_CODES.has(d.code)) return { problem: `pusher:error with undocumented code ${JSON.stringify(d.code)}` };
    if (typeof d.message !== 'string' || d.message === '') return { problem: 'pusher:error without a message string' };
    if (/\bat .+:\d+:\d+/.test(d.message) || d.message.includes('.js:')) return { problem: 'pusher:error message looks like a stack trace' };
  } else if (ev === 'pusher:subscription_error') {
    const d = f.data;
    if (typeof f.channel !== 'string') return { problem: 'subscription_error without a channel' };
    if (d === null || typeof d !== 'object') return { problem: 'subscription_error without a data object' };
    const statuses = SUB_ERROR_STATUS[d.type];
    if (!statuses) return { problem: `subscription_error with undocumented type ${JSON.stringify(d.type)}` };
    if (!statuses.has(d.status)) return { problem: `subscription_error ${d.type} with status ${JSON.stringify(d.status)}` };
    if (typeof d.error !== 'string' || d.error === '') return { problem: 'subscription_error without an error string' };
    if (/\bat .+:\d+:\d+/.test(d.error) || d.error.includes('.js:')) return { problem: 'subscription_error looks like a stack trace' };
  } else if (ev === 'pusher_internal:subscription_succeeded') {
    if (typeof f.data !== 'string') return { problem: 'subscription_succeeded data is not a string' };
    let d: any;
    try {
      d = JSON.parse(f.data);
    } catch {
      return { problem: 'subscription_succeeded data is not JSON' };
    }
    if (f.channel.startsWith('presence-')) {
      const p = d?.presence;
      if (!p || !Array.isArray(p.ids) || typeof p.hash !== 'object' || p.count !== p.ids.length) {
        return { problem: 'presence subscription_succeeded without {presence: {ids, hash, count}}' };
      }
    }
  } else if (ev === 'pusher:connection_established') {
    let d: any;
    try {
      d = JSON.parse(f.data);
    } catch {
      return { problem: 'connection_established data is not a JSON string' };
    }
    if (typeof d?.socket_id !== 'string' || !/^\d+\.\d+$/.test(d.socket_id)) return { problem: 'connection_established without a socket_id' };
  } else if (ev === 'pusher_internal:member_added' || ev === 'pusher_internal:member_removed') {
    let d: any;
    try {
      d = JSON.parse(f.data);
    } catch {
      return { problem: `${ev} data is not a JSON string` };
    }
    if (d === null || typeof d !== 'object' || !('user_id' in d)) return { problem: `${ev} without user_id` };
  }
  return { problem: null, event: ev, frame: f };
}

// ---------------------------------------------------------------------------------------
// Bookkeeping.

class Report extends FuzzReport {
  readonly errorCodes = new Map<string, number>();
  readonly closes = new Map<string, number>();
  /** Error texts by their first words (to see which checks the fuzz reached). */
  readonly messages = new Map<string, number>();
  frames = 0;
  received = 0;
  connects = 0;
}

/** The first three words of an error text, odd ones (names, numbers) as '…'. */
function firstWords(s: string): string {
  return s.split(/\s+/).slice(0, 3).map((w) => (/^[A-Za-z_:"-]{1,20}$/.test(w) ? w : '…')).join(' ');
}

interface Waiter {
  pred: (f: any) => boolean;
  resolve: (f: any) => void;
}

/** A raw client that checks every frame it gets and never throws on what arrives. */
class FuzzConn {
  ws!: WebSocket;
  socketId = '';
  closeCode: number | null = null;
  closeReason = '';
  private waiters: Waiter[] = [];
  private closeWaiters: ((code: number) => void)[] = [];
  /** The last frame sent, for the failure message when the connection closes. */
  lastSent = '';
  /** The client library's last error (e.g. "Unexpected server response: 400"). */
  lastError = '';

  constructor(readonly label: string, readonly report: Report) {}

  open(url: string, headers: Record<string, string> = {}): Promise<any> {
    this.closeCode = null;
    this.socketId = '';
    this.ws = new WebSocket(url, { headers, maxPayload: 0 });
    this.ws.on('message', (raw, isBinary) => {
      this.report.received++;
      if (isBinary) return this.report.problem(`${this.label}: server sent a binary frame`);
      const text = raw.toString();
      const r = checkServerFrame(text);
      if (r.problem) return this.report.problem(`${this.label}: ${r.problem}: ${clip(text)} (after sending ${clip(this.lastSent, 200)})`);
      if (r.event === 'pusher:error') {
        this.report.count(this.report.errorCodes, `error ${r.frame.data.code}`);
        this.report.count(this.report.messages, `${r.frame.data.code} ${firstWords(r.frame.data.message)}`);
      }
      if (r.event === 'pusher:subscription_error') {
        this.report.count(this.report.errorCodes, `${r.frame.data.type} ${r.frame.data.status}`);
        this.report.count(this.report.messages, `${r.frame.data.type} ${firstWords(r.frame.data.error)}`);
      }
      for (const w of [...this.waiters]) {
        if (w.pred(r.frame)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(r.frame);
        }
      }
    });
    this.lastError = '';
    this.ws.on('error', (err) => { this.lastError = err.message; /* the close event follows */ });
    this.ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      for (const w of this.closeWaiters.splice(0)) w(code);
      for (const w of this.waiters.splice(0)) w.resolve(null);
    });
    // First frame: connection_established, or an error frame before a close.
    return this.wait(() => true, 8000);
  }

  /** Resolves with the first later frame matching pred, null if the socket closes first, throws on timeout. */
  wait(pred: (f: any) => boolean, timeoutMs: number): Promise<any> {
    if (this.closeCode !== null) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        pred,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`${this.label}: no answer within ${timeoutMs} ms (last sent ${clip(this.lastSent, 200)})`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  closed(timeoutMs: number): Promise<number | null> {
    if (this.closeCode !== null) return Promise.resolve(this.closeCode);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      this.closeWaiters.push((c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
  }

  send(payload: string | Buffer, binary = false): void {
    this.lastSent = typeof payload === 'string' ? payload : `<${payload.length} bytes${binary ? ' binary' : ' as text'}>`;
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(payload, { binary });
  }

  close(): Promise<number | null> {
    if (this.closeCode === null && this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    return this.closed(3000);
  }
}

// ---------------------------------------------------------------------------------------
// Frame generation.

interface Ctx {
  socketId: string;
  userId: string;
  /** Channels this connection is subscribed to (for client events that pass the checks). */
  joined: string[];
}

interface FuzzFrame {
  kind: string;
  payload: string | Buffer;
  binary?: boolean;
  /** Frames after which a close is expected (or at least allowed). */
  closes?: 'too-big' | 'past-cut' | 'bad-utf8';
}

const BASE_CHANNELS = ['fuzz-pub', 'private-fuzz', 'presence-fuzz'];
const POOL = [...BASE_CHANNELS, 'private-encrypted-fuzz', 'cache-fuzz', 'presence-cache-fuzz', 'fuzz#cache-60', 'private-fuzz-2', 'presence-fuzz-2'];

const EVENT_NAMES = [
  'pusher:subscribe', 'pusher:unsubscribe', 'pusher:ping', 'pusher:pong', 'pusher:signin',
  'pusher:enable_delta_compression', 'pusher:delta_sync_error', 'pusher:cache_miss', 'pusher:error',
  'pusher_internal:subscription_succeeded', 'pusher_internal:member_added', 'pusher:nope', 'pusher:',
  'proto:subscribe', 'proto:unsubscribe', 'proto:ping', 'proto:signin', 'proto_internal:member_added', 'proto:',
  'proto:proto:subscribe', 'PUSHER:SUBSCRIBE', 'pusher:subscribe ', ' pusher:subscribe', 'pusher:subscribe\u0000',
  'client-', 'client-x', 'client-💩', 'client-' + 'x'.repeat(250), 'client', 'CLIENT-x', 'client-\u0000',
];

function pickEvent(rng: Rng): string {
  return rng.bool(0.8) ? rng.pick(EVENT_NAMES) : randString(rng, 50);
}

/** A subscribe data object, sometimes correctly signed for the (possibly odd) channel and channel_data. */
function subscribeData(rng: Rng, ctx: Ctx): Record<string, unknown> {
  const channel = randChannel(rng, POOL);
  const data: Record<string, unknown> = { channel };
  let channelData: string | undefined;
  if (channel.startsWith('presence-') || rng.bool(0.1)) {
    channelData = presenceChannelData(rng, ctx);
    data.channel_data = channelData;
  }
  if (channel.startsWith('private-') || channel.startsWith('presence-') || rng.bool(0.1)) {
    data.auth = rng.bool(0.75)
      ? channelAuth(APP.key, APP.secret, ctx.socketId, channel, channel.startsWith('presence-') ? channelData : undefined)
      : rng.pick([junkValue(rng), `${APP.key}:${'0'.repeat(64)}`, `${APP.key}:`, ':', `${APP.key}:${randName(rng, 64)}`]);
  }
  if (rng.bool(0.1)) data.delta = junkValue(rng);
  if (rng.bool(0.1)) data.filter = rng.bool() ? randJson(rng, 3) : { op: 'and', nodes: [{ key: 'a', cmp: 'eq', val: junkValue(rng) }] };
  return data;
}

/** Presence channel_data text: valid, weird user_id / user_info, deep, or not JSON at all. */
function presenceChannelData(rng: Rng, ctx: Ctx): string {
  switch (rng.int(9)) {
    case 0: return JSON.stringify({ user_id: ctx.userId, user_info: { name: randString(rng) } });
    case 1: return JSON.stringify({ user_id: junkValue(rng), user_info: junkValue(rng) });
    case 2: return JSON.stringify({ user_id: rng.pick([...NASTY_STRINGS, ...NASTY_NUMBERS]), user_info: randJson(rng, 3) });
    case 3: return JSON.stringify({ user_id: randString(rng, 3000), user_info: 'x'.repeat(rng.range(1500, 4000)) });
    case 4: return `{"user_id":"u-deep","user_info":${deepJson(rng, rng.range(1000, 28000))}}`;
    case 5: return `{"user_id":${deepJson(rng, rng.range(2, 20000))}}`;
    case 6: return mutateText(rng, JSON.stringify({ user_id: ctx.userId, user_info: {} }));
    case 7: return JSON.stringify(randJson(rng, 3));
    default: return randString(rng);
  }
}

/** A client event: mostly on a joined channel (so it passes the checks), with garbage data. */
function clientEvent(rng: Rng, ctx: Ctx): Record<string, unknown> {
  const ev: Record<string, unknown> = {
    event: rng.bool(0.8) ? 'client-' + randName(rng, rng.range(0, 20), 0.05) : rng.pick(EVENT_NAMES.filter((e) => e.startsWith('client'))),
    channel: rng.bool(0.8) && ctx.joined.length > 0 ? rng.pick(ctx.joined) : randChannel(rng, POOL),
  };
  switch (rng.int(7)) {
    case 0: ev.data = randJson(rng, 4); break;
    case 1: ev.data = junkValue(rng); break;
    case 2: ev.data = JSON.stringify(randJson(rng, 3)); break;
    case 3: break; // no data
    case 4: ev.data = 'x'.repeat(rng.range(30_000, 60_000)); break; // big, but under the frame limit
    case 5: ev.data = { s: randString(rng), n: rng.pick(NASTY_NUMBERS), u: '\u0000💩\ud800' }; break;
    default: ev.data = rng.bool() ? [] : {};
  }
  return rng.bool(0.2) ? mutateObject(rng, ev) : ev;
}

function genFrame(rng: Rng, ctx: Ctx): FuzzFrame {
  const kind = rng.weighted<string>([
    [14, 'subscribe'], [6, 'presence'], [4, 'unsubscribe'], [16, 'client-event'], [3, 'client-deep'],
    [6, 'ping'], [6, 'event-junk'], [8, 'random-json'], [8, 'mutated-text'], [4, 'non-object'],
    [4, 'random-text'], [3, 'binary'], [3, 'deep-frame'], [3, 'huge-fields'], [3, 'dup-keys'],
    [3, 'proto'], [2, 'signin'], [1, 'near-limit'],
    [0.5, 'too-big'], [0.05, 'past-cut'], [0.3, 'bad-utf8'],
  ]);
  const j = (v: unknown) => JSON.stringify(v);
  switch (kind) {
    case 'subscribe': {
      const data = subscribeData(rng, ctx);
      const f: Record<string, unknown> = { event: rng.pick(['pusher:subscribe', 'proto:subscribe']), data: rng.bool(0.2) ? j(data) : data };
      return { kind, payload: j(rng.bool(0.3) ? mutateObject(rng, f, ['event', 'data', 'channel']) : f) };
    }
    case 'presence': {
      const channel = rng.bool(0.7) ? rng.pick(['presence-fuzz', 'presence-fuzz-2', 'presence-cache-fuzz']) : 'presence-' + randName(rng, rng.range(1, 30));
      const channelData = presenceChannelData(rng, ctx);
      const auth = channelAuth(APP.key, APP.secret, ctx.socketId, channel, channelData);
      const data = rng.bool(0.8) ? { channel, auth, channel_data: channelData } : mutateObject(rng, { channel, auth, channel_data: channelData });
      const f = { event: 'pusher:subscribe', data: rng.bool(0.2) ? j(data) : data };
      // A repeated subscribe to a channel the socket is in is answered from the membership it
      // has: the fresh random names (and the fuzz's unsubscribes) get channel_data looked at.
      return { kind, payload: j(f) };
    }
    case 'unsubscribe': {
      const data = rng.pick<unknown>([{ channel: randChannel(rng, POOL) }, { channel: junkValue(rng) }, junkValue(rng), j({ channel: rng.pick(POOL) })]);
      return { kind, payload: j({ event: rng.pick(['pusher:unsubscribe', 'proto:unsubscribe']), data }) };
    }
    case 'client-event':
      return { kind, payload: j(clientEvent(rng, ctx)) };
    case 'client-deep': {
      // Deep data on a joined private/presence channel: passes every check, so the server
      // re-serialises it (regression: a stack overflow there killed the shard).
      const ch = ctx.joined.filter((c) => c !== 'fuzz-pub');
      const channel = ch.length > 0 ? rng.pick(ch) : 'private-fuzz';
      return { kind, payload: `{"event":"client-deep","channel":${j(channel)},"data":${deepJson(rng, rng.range(1000, 30000))}}` };
    }
    case 'ping':
      return { kind, payload: j({ event: rng.pick(['pusher:ping', 'proto:ping', 'pusher:pong', 'proto:pong']), data: rng.bool() ? junkValue(rng) : undefined, channel: rng.bool(0.2) ? junkValue(rng) : undefined }) };
    case 'event-junk':
      return { kind, payload: j({ event: junkValue(rng), data: junkValue(rng), channel: junkValue(rng) }) };
    case 'random-json': {
      const v = randJson(rng, 4);
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && rng.bool(0.7)) (v as Record<string, unknown>).event = pickEvent(rng);
      return { kind, payload: j(v) };
    }
    case 'mutated-text': {
      const base = rng.pick([
        () => j({ event: 'pusher:subscribe', data: subscribeData(rng, ctx) }),
        () => j(clientEvent(rng, ctx)),
        () => j({ event: 'pusher:ping', data: {} }),
        () => j({ event: 'pusher:unsubscribe', data: { channel: rng.pick(POOL) } }),
      ])();
      let s = base;
      const n = rng.range(1, 3);
      for (let i = 0; i < n; i++) s = mutateText(rng, s);
      return { kind, payload: s };
    }
    case 'non-object':
      return { kind, payload: rng.pick(['null', 'true', '0', '-1e999', '"pusher:ping"', '[]', '[{"event":"pusher:ping"}]', '""', '{}', '{"event":""}', '{"event":null}', '{"data":{}}', ' ', '\u0000', '{"event":"pusher:subscribe"}', '{"event":"pusher:subscribe","data":null}', '{"event":"pusher:subscribe","data":"null"}', '{"event":"pusher:subscribe","data":"[]"}', '{"event":"pusher:subscribe","data":7}', '{"event":"pusher:unsubscribe"}', '{"event":"pusher:unsubscribe","data":"x"}', '{"event":"client-x"}', '{"event":"client-x","channel":{}}']) };
    case 'random-text': {
      const b = rng.bytes(rng.range(0, 400));
      return { kind, payload: rng.bool() ? b.toString('utf8') : b.toString('latin1') };
    }
    case 'binary': {
      const payload = rng.bool(0.5) ? rng.bytes(rng.range(0, 400)) : Buffer.from(j(rng.bool() ? { event: 'pusher:ping', data: {} } : { event: 'pusher:subscribe', data: subscribeData(rng, ctx) }));
      return { kind, payload, binary: true };
    }
    case 'deep-frame': {
      const d = rng.range(100, 30000);
      return { kind, payload: rng.pick([
        () => deepJson(rng, d),
        () => `{"event":"pusher:subscribe","data":${deepJson(rng, d)}}`,
        () => `{"event":"pusher:subscribe","data":{"channel":${deepJson(rng, d)}}}`,
        () => `{"event":${deepJson(rng, d)}}`,
        () => `{"event":"pusher:unsubscribe","data":${deepJson(rng, d)}}`,
        () => `{"event":"pusher:ping","data":${deepJson(rng, d)}}`,
        () => `{"event":"pusher:subscribe","data":${j(deepJson(rng, d))}}`,
      ])() };
    }
    case 'huge-fields': {
      const big = rng.pick(['x', '💩', '\u0000', '"', '\\']).repeat(rng.range(5000, 15000));
      return { kind, payload: j(rng.pick([
        { event: big, data: {} },
        { event: 'pusher:subscribe', data: { channel: big } },
        { event: 'pusher:subscribe', data: { channel: 'private-fuzz', auth: big } },
        { event: 'client-x', channel: big, data: big },
        { event: 'pusher:subscribe', data: { channel: 'presence-fuzz', auth: big, channel_data: big } },
      ])) };
    }
    case 'dup-keys':
      return { kind, payload: rng.pick([
        '{"event":"pusher:subscribe","event":"client-x","channel":"private-fuzz","data":{}}',
        '{"event":"pusher:subscribe","data":{"channel":"a","channel":{"x":1}}}',
        '{"event":"pusher:subscribe","data":{"__proto__":{"channel":"proto-pollution"}}}',
        '{"event":"pusher:subscribe","data":{"channel":"__proto__"}}',
        '{"event":"pusher:subscribe","data":{"channel":"constructor"}}',
        '{"__proto__":{"event":"pusher:ping"}}',
        '{"event":"client-x","channel":"private-fuzz","data":{"__proto__":{"polluted":true}}}',
        '{"event":"pusher:subscribe","data":{"channel":"presence-fuzz","channel_data":"{\\"user_id\\":\\"__proto__\\"}"}}',
      ]) };
    case 'proto':
      return { kind, payload: j({ event: rng.pick(['proto:subscribe', 'proto_internal:subscribe', 'proto:unsubscribe', 'proto:ping', 'proto:', 'proto_internal:', 'proto:signin', 'proto:enable_delta_compression', 'proto:delta_sync_error']), data: rng.bool() ? subscribeData(rng, ctx) : junkValue(rng) }) };
    case 'signin': {
      // Failed sign-in closes with 4009 (documented); correctly signed odd user_data gets further.
      const userData = rng.pick([
        () => j({ id: junkValue(rng) }),
        () => j({ id: randString(rng), watchlist: junkValue(rng), user_info: randJson(rng, 3) }),
        () => j({ id: rng.pick(['', '💩', '\u0000', 'a'.repeat(5000), ctx.userId]) }),
        () => `{"id":"deep","x":${deepJson(rng, rng.range(100, 20000))}}`,
        () => mutateText(rng, j({ id: ctx.userId })),
        () => randString(rng),
      ])();
      const auth = rng.bool(0.6) ? userAuth(APP.key, APP.secret, ctx.socketId, userData) : junkValue(rng);
      const data = rng.bool(0.85) ? { user_data: userData, auth } : junkValue(rng);
      return { kind, payload: j({ event: rng.pick(['pusher:signin', 'proto:signin']), data: rng.bool(0.2) ? j(data) : data }) };
    }
    case 'near-limit':
      // Just under the frame limit: accepted (an error frame at most), not closed.
      return { kind, payload: j({ event: 'client-big', channel: 'private-fuzz', data: 'y'.repeat(MAX_PAYLOAD - 200) }) };
    case 'too-big':
      return { kind, payload: j({ event: 'pusher:ping', data: 'z'.repeat(rng.range(MAX_PAYLOAD + 1, 3 * MAX_PAYLOAD)) }), closes: 'too-big' };
    case 'past-cut':
      return { kind, payload: j({ event: 'pusher:ping', data: 'z'.repeat(4 * MAX_PAYLOAD + 10) }), closes: 'past-cut' };
    case 'bad-utf8': {
      const b = Buffer.concat([Buffer.from('{"event":"pusher:ping","data":"'), Buffer.from([rng.pick([0xff, 0xc0, 0xed, 0xf8]), 0x80, 0xa0]), Buffer.from('"}')]);
      return { kind, payload: b, binary: false, closes: 'bad-utf8' };
    }
  }
  throw new Error(`unknown kind ${kind}`);
}

// ---------------------------------------------------------------------------------------
// Driving one connection.

async function openConn(srv: TestServer, c: FuzzConn, idx: number, ctx: Ctx): Promise<void> {
  const first = await c.open(srv.wsUrl());
  if (first?.event !== 'pusher:connection_established') throw new Error(`${c.label}: no connection_established: ${JSON.stringify(first)}`);
  c.report.connects++;
  c.socketId = JSON.parse(first.data).socket_id;
  ctx.socketId = c.socketId;
  ctx.userId = `u${idx}`;
  ctx.joined = [];
  const cd = JSON.stringify({ user_id: ctx.userId, user_info: { conn: idx } });
  const subs: Record<string, unknown>[] = [
    { channel: 'fuzz-pub' },
    { channel: 'private-fuzz', auth: channelAuth(APP.key, APP.secret, c.socketId, 'private-fuzz') },
    { channel: 'presence-fuzz', auth: channelAuth(APP.key, APP.secret, c.socketId, 'presence-fuzz', cd), channel_data: cd },
  ];
  for (const data of subs) {
    const ch = data.channel as string;
    c.send(JSON.stringify({ event: 'pusher:subscribe', data }));
    const f = await c.wait((x) => x.channel === ch && (x.event === 'pusher_internal:subscription_succeeded' || x.event === 'pusher:subscription_error'), 10_000);
    // presence-fuzz can be full of fuzzed members; the other two must succeed
    if (f?.event === 'pusher_internal:subscription_succeeded') ctx.joined.push(ch);
    else if (ch !== 'presence-fuzz') throw new Error(`${c.label}: base subscribe to ${ch} failed: ${JSON.stringify(f)}`);
  }
}

/** Sends a sentinel subscribe and waits for its answer: everything sent before it has been handled. */
async function sync(c: FuzzConn, n: number): Promise<boolean> {
  const ch = `sync-${c.label}-${n}`;
  // Back into private-fuzz (the fuzz may have left it) so that client events keep passing the checks.
  if (c.socketId !== '') c.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'private-fuzz', auth: channelAuth(APP.key, APP.secret, c.socketId, 'private-fuzz') } }));
  c.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: ch } }));
  const f = await c.wait((x) => x.channel === ch, 15_000);
  if (f === null) return false; // closed
  if (f.event !== 'pusher_internal:subscription_succeeded') c.report.problem(`${c.label}: sentinel subscribe answered ${JSON.stringify(f)}`);
  c.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel: ch } }));
  return true;
}

/** Counts a close under `cause`; a problem when the code is not allowed (`detail` says what was sent). */
function recordClose(c: FuzzConn, cause: string, code: number | null, allowed: (code: number) => boolean, detail = ''): void {
  const r = c.report;
  r.count(r.closes, `${cause} → ${code ?? 'stayed open'}`);
  if (code !== null && !allowed(code)) {
    r.problem(`${c.label}: closed with ${code} "${c.closeReason}"${c.lastError ? ` (client error: ${c.lastError})` : ''} after ${cause}${detail}: ${clip(c.lastSent, 200)}`);
  }
}

async function driveConn(srv: TestServer, rng: Rng, idx: number, frames: number, report: Report): Promise<void> {
  const c = new FuzzConn(`c${idx}`, report);
  const ctx: Ctx = { socketId: '', userId: '', joined: [] };
  await openConn(srv, c, idx, ctx);
  let sent = 0;
  let syncs = 0;
  let inBatch: string[] = [];
  let signinInBatch = false;
  while (sent < frames) {
    const f = genFrame(rng, ctx);
    if (!f.closes) {
      // Anything over the limit closes the connection, whatever kind made it that big.
      const size = typeof f.payload === 'string' ? Buffer.byteLength(f.payload) : f.payload.length;
      if (size > 4 * MAX_PAYLOAD) f.closes = 'past-cut';
      else if (size > MAX_PAYLOAD) f.closes = 'too-big';
    }
    sent++;
    report.frames++;
    if (f.closes) {
      // Alone: flush what came before, then expect the close this frame may cause.
      if (!(await sync(c, syncs++))) {
        recordClose(c, `a batch${signinInBatch ? ' with a signin' : ''}`, c.closeCode, (code) => PROTOCOL_CLOSE.has(code), ` [${inBatch.join(',')}]`);
        await openConn(srv, c, idx, ctx);
      }
      inBatch = [];
      signinInBatch = false;
      c.send(f.payload, f.binary);
      if (f.closes === 'too-big') {
        const code = await c.closed(8000);
        recordClose(c, 'too-big frame', code, (x) => x === 1009);
        if (code === null) report.problem(`${c.label}: a ${f.payload.length}-byte frame did not close the connection (1009 expected)`);
      } else if (f.closes === 'past-cut') {
        const code = await c.closed(8000);
        recordClose(c, `frame over 4× the limit`, code, (x) => x === 1009 || x === 1006);
      } else {
        // Not UTF-8 in a text frame: the client broke the protocol; record what happens.
        const code = await c.closed(1500);
        recordClose(c, 'text frame not UTF-8', code, (x) => x === 1000 || x === 1006 || x === 1007 || x === 1002);
      }
      if (c.closeCode === null) await c.close();
      await openConn(srv, c, idx, ctx);
      continue;
    }
    c.send(f.payload, f.binary);
    inBatch.push(f.kind);
    if (typeof f.payload === 'string' && f.payload.includes('signin')) signinInBatch = true;
    if (inBatch.length >= BATCH || sent === frames) {
      if (!(await sync(c, syncs++))) {
        recordClose(c, `a batch${signinInBatch ? ' with a signin' : ''}`, c.closeCode, (code) => PROTOCOL_CLOSE.has(code), ` [${inBatch.join(',')}]`);
        await openConn(srv, c, idx, ctx);
      }
      inBatch = [];
      signinInBatch = false;
    }
  }
  await c.close();
}

/** Connection attempts with random keys, paths, queries and Origin headers. */
async function connectCases(srv: TestServer, rng: Rng, n: number, report: Report): Promise<void> {
  const keys = [APP.key, DISABLED.key, ORIGIN.key];
  const parallel = 8;
  let next = 0;
  async function one(i: number) {
    const r = rng.fork();
    const keyKind = r.int(6);
    const key = keyKind <= 1 ? r.pick(keys) : keyKind === 2 ? encode(r.pick(keys)) + r.pick(['', '/', '%', '%zz']) : encode(randString(r, 300)).slice(0, 2000) + r.pick(['', '%zz', '%']);
    const query = r.pick([
      '', '?protocol=7&client=js&version=8.4.0', '?protocol=abc', '?protocol=999999999999999999999', `?${encode(randString(r))}=${encode(randString(r))}`,
      '?protocol=7&protocol=8', '?%zz=%zz', '?' + 'a'.repeat(r.range(100, 3000)), '?&&&==&',
    ]);
    const headers: Record<string, string> = {};
    if (r.bool(0.5)) headers.Origin = r.pick(['https://ok.example', 'https://evil.example', 'null', 'http://ok.example:1', 'https://ok.example.evil', '*', 'x', encode(randString(r, 50))]);
    const url = `ws://127.0.0.1:${srv.port}/app/${key}${query}`;
    // '/app/', '/app/<key>/' (and '/app/.', resolved by the client to '/app/') are not the
    // WebSocket route: the upgrade is refused with an HTTP 404.
    const wsRoute = /^\/app\/[^/]+$/.test(new URL(url).pathname);
    const c = new FuzzConn(`connect${i}`, report);
    c.lastSent = `connect ${clip(url, 200)} ${JSON.stringify(headers)}`;
    let first: any;
    try {
      first = await c.open(url, headers);
    } catch (err) {
      report.problem(`connect${i}: ${(err as Error).message}`);
      c.ws.terminate();
      return;
    }
    report.frames++;
    if (first?.event === 'pusher:connection_established') {
      c.send(JSON.stringify({ event: 'pusher:ping' }));
      const pong = await c.wait((f) => f.event === 'pusher:pong', 8000);
      if (!pong) report.problem(`connect${i}: accepted connection closed before answering a ping (${c.closeCode}): ${c.lastSent}`);
      report.count(report.closes, 'connect → established');
      await c.close();
      return;
    }
    // Refused: an error frame with a documented code, then a close with the same code.
    const code = await c.closed(8000);
    if (first === null) {
      // No frame at all: only acceptable when the path is not the WebSocket route.
      if (!wsRoute && c.lastError === 'Unexpected server response: 404') {
        report.count(report.closes, 'connect to a path that is not /app/<key> → HTTP 404');
        return;
      }
      recordClose(c, 'connect (no frame)', code, () => false);
      return;
    }
    if (first.event !== 'pusher:error') report.problem(`connect${i}: first frame ${JSON.stringify(first)} for ${c.lastSent}`);
    recordClose(c, `connect refused ${first.data?.code}`, code, (x) => PROTOCOL_CLOSE.has(x) && x === first.data?.code);
  }
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < n) await one(next++);
  }));
}

// ---------------------------------------------------------------------------------------
// After the fuzz: the server still does its job.

/** Shard restarts so far (primary /metrics): a shard that crashed is restarted, so a crash shows here. */
function restarts(srv: TestServer): Promise<number> {
  return metric(srv.server.metricsPort!, 'shard_restarts_total');
}

async function stillServes(t: Test, srv: TestServer, tag: string, before: Set<string>): Promise<void> {
  const up = await getJson(srv.port, '/up');
  t.equal(up.status, 200, `${tag}: GET /up answers 200`);
  t.equal(up.body?.status, 'ok', `${tag}: GET /up says ok`);

  const a = await RawClient.connect(srv.wsUrl());
  const b = await RawClient.connect(srv.wsUrl());
  try {
    t.equal((await a.subscribe('after-fuzz')).event, 'pusher_internal:subscription_succeeded', `${tag}: fresh client subscribes`);
    await srv.sdk().trigger('after-fuzz', 'hello', { n: 1 });
    const got = await a.event('hello', 'after-fuzz', 5000);
    t.same(JSON.parse(got.data), { n: 1 }, `${tag}: fresh client receives an event published with the SDK`);

    t.equal((await a.subscribeAuthed('private-after')).event, 'pusher_internal:subscription_succeeded', `${tag}: private subscribe`);
    t.equal((await b.subscribeAuthed('private-after')).event, 'pusher_internal:subscription_succeeded', `${tag}: private subscribe (2)`);
    a.send({ event: 'client-hi', channel: 'private-after', data: { x: 1 } });
    const ce = await b.event('client-hi', 'private-after', 5000);
    t.same(ce.data, { x: 1 }, `${tag}: client events still flow`);

    const cd = { user_id: 'after', user_info: { ok: true } };
    const p = await a.subscribeAuthed('presence-after', cd);
    t.equal(p.event, 'pusher_internal:subscription_succeeded', `${tag}: presence subscribe`);
  } finally {
    await a.close();
    await b.close();
  }
  const prefixes = await livePrefixes(srv, 16 * WORKERS);
  t.equal(prefixes.size, WORKERS, `${tag}: every shard (${WORKERS}) still accepts connections`);
  t.same([...prefixes].filter((p) => !before.has(p)), [], `${tag}: no shard was replaced (a restarted shard has a new socket_id prefix)`);
  t.equal(await restarts(srv), 0, `${tag}: shard_restarts_total is 0`);
}

// ---------------------------------------------------------------------------------------

let srvP: Promise<TestServer> | null = null;
function server(): Promise<TestServer> {
  srvP ??= startServer({
    apps: [{ ...APP }, DISABLED, ORIGIN],
    websocket: { max_payload_kb: MAX_PAYLOAD / 1024 },
    // On, as in production (label values from fuzzed input), and for shard_restarts_total.
    metrics: { enabled: true, host: '127.0.0.1', port: 0 },
  });
  return srvP;
}
t.teardown(async () => {
  if (srvP) await (await srvP).stop();
});

t.test('regressions (deterministic)', async (t) => {
  const srv = await server();

  t.test('client event whose data is nested 30,000 deep does not kill the shard', async (t) => {
    const a = await RawClient.connect(srv.wsUrl());
    const b = await RawClient.connect(srv.wsUrl());
    await a.subscribeAuthed('private-deep');
    await b.subscribeAuthed('private-deep');
    a.send(`{"event":"client-deep","channel":"private-deep","data":${'['.repeat(30000)}${']'.repeat(30000)}}`);
    a.send({ event: 'client-after', channel: 'private-deep', data: { ok: 1 } });
    const after = await b.event('client-after', 'private-deep', 5000);
    t.same(after.data, { ok: 1 }, 'the shard is alive and forwards the next event');
    t.equal(a.closeCode, null, 'sender still connected');
    const err = a.frames.find((f) => f.event === 'pusher:error');
    if (err) t.equal(err.data.code, 4301, 'a refusal, if any, is 4301');
    await a.close();
    await b.close();
  });

  t.test('presence user_info nested 30,000 deep does not kill the shard', async (t) => {
    const a = await RawClient.connect(srv.wsUrl());
    const cd = `{"user_id":"deep","user_info":${'['.repeat(30000)}${']'.repeat(30000)}}`; // under the 64 KB frame limit
    const auth = channelAuth(APP.key, APP.secret, a.socketId, 'presence-deep', cd);
    a.send({ event: 'pusher:subscribe', data: { channel: 'presence-deep', auth, channel_data: cd } });
    const r = await a.next((f) => f.channel === 'presence-deep', 5000);
    t.equal(r.event, 'pusher:subscription_error', 'refused');
    t.equal(r.data.type, 'LimitReached', 'as a member-size limit');
    t.equal(r.data.status, 4301, 'status 4301');
    a.send({ event: 'pusher:ping' });
    await a.event('pusher:pong', undefined, 5000);
    await a.close();
  });

  t.test('a refused connection with a long non-ASCII key closes with 4001 (close reason cut inside a character gave 1006)', async (t) => {
    const key = encodeURIComponent('é'.repeat(100));
    const c = new RawClient(new WebSocket(srv.wsUrl(key)));
    const first = await c.next(() => true, 5000);
    t.equal(first.event, 'pusher:error', 'an error frame first');
    t.equal(first.data.code, 4001, 'code 4001');
    t.equal(await c.closed(5000), 4001, 'closed with 4001');
  });

  t.test('frames nested 15,000–30,000 deep in every field are answered, not fatal', async (t) => {
    const a = await RawClient.connect(srv.wsUrl());
    const deep = '['.repeat(30000) + ']'.repeat(30000);
    const half = '['.repeat(15000) + ']'.repeat(15000);
    for (const s of [deep, `{"event":${deep}}`, `{"event":"pusher:subscribe","data":${deep}}`,
      `{"event":"pusher:unsubscribe","data":{"channel":${deep}}}`, `{"event":"client-x","channel":${half},"data":${half}}`]) {
      a.send(s);
    }
    a.send({ event: 'pusher:ping' });
    await a.event('pusher:pong', undefined, 5000);
    t.equal(a.closeCode, null, 'still connected');
    await a.close();
  });
});

t.test(`ws fuzz: seed ${SEED} (FUZZ_SEED=${SEED}), ${FRAME_CASES} frames on ${CONNECTIONS} connections + ${CONNECT_CASES} connection attempts, ${WORKERS} shard(s)`, async (t) => {
  const srv = await server();
  const before = await livePrefixes(srv, 16 * WORKERS);
  t.equal(before.size, WORKERS, 'every shard accepts connections before the fuzz');
  const started = Date.now();
  t.comment(`seed ${SEED}; reproduce with FUZZ_SEED=${SEED}`);
  const rng = new Rng(SEED);
  const report = new Report();
  const perConn = Math.ceil(FRAME_CASES / CONNECTIONS);
  const streams = Array.from({ length: CONNECTIONS }, () => rng.fork());
  const connectRng = rng.fork();
  await Promise.all([
    ...streams.map((r, i) => driveConn(srv, r, i, perConn, report)),
    connectCases(srv, connectRng, CONNECT_CASES, report),
  ]);
  const fuzzMs = Date.now() - started;
  t.comment(`${report.frames} cases (${perConn * CONNECTIONS} frames, ${CONNECT_CASES} connects) in ${fuzzMs} ms; ${report.received} frames received; ${report.connects} (re)connects`);
  t.comment(`errors: ${report.summary(report.errorCodes, true)}`);
  t.comment(`closes: ${report.summary(report.closes, true)}`);
  t.comment(`error texts: ${report.summary(report.messages, true)}`);
  t.equal(report.problems.length, 0, `no problems (first ones:\n${report.problems.slice(0, 20).join('\n')})`);
  t.ok(report.frames >= FRAME_CASES, 'every case ran');

  await stillServes(t, srv, 'after the fuzz', before);
  t.comment(`total ${Date.now() - started} ms`);
});
