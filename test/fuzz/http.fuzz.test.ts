// test-modes: workers 4 (the parsers and their answers are the same on every shard; the check that every shard still accepts connections spans 4)
// HTTP API fuzz: random bodies, query strings, paths and
// headers at every route — most requests correctly signed over the mutated request (so
// they get past auth and reach validation), some corrupted or unsigned — plus malformed
// requests on raw sockets (request lines, headers, framing a client library cannot send).
// Bounded and seeded: FUZZ_SEED overrides the seed, FUZZ_SCALE scales the case count.
//
// Expectations:
// - never a 500: every status is one of 200, 204, 400, 401, 404, 413, 429, 503 (the spec's)
//   (any other is a failure, listed with the request that caused it);
// - every non-2xx body is JSON {"error": "<string>"}: no stack trace, no secret;
// - a raw malformed request gets such an answer, or none (the connection closed or left
//   waiting): both are recorded;
// - no shard crashed (restarts) and the server still serves correct traffic afterwards:
//   an SDK trigger reaches a subscriber.

import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import { apiStringToSign, signApiQuery } from '../../src/protocol/api-auth';
import { hmacSha256Hex, md5Hex } from '../../src/protocol/hmac';
import { metric } from '../faults/api';
import { getJson, livePrefixes } from './after';
import { FuzzReport } from '../helpers/fuzz-report';
import { APP, RawClient, WORKERS, startServer, type TestServer } from '../helpers/server';
import {
  NASTY_NUMBERS, Rng, clip, deepJson, encode, fuzzCases, fuzzSeed, junkValue, mutateObject, mutateText,
  randChannel, randJson, randName, randString,
} from './gen';

const SEED = fuzzSeed(0x0c0ffee2);
const HTTP_CASES = fuzzCases(9600);
const RAW_CASES = fuzzCases(400);
/** Requests in flight (over AGENT_SOCKETS keep-alive connections). */
const PARALLEL = 16;
const AGENT_SOCKETS = 8;
const RAW_PARALLEL = 64;
/** How long a raw malformed request may wait for an answer (uWS leaves some unanswered). */
const RAW_WAIT_MS = 600;
/** Bound for a raw case whose answers are all expected: it ends as soon as they are in. */
const RAW_EXPECTED_WAIT_MS = 10_000;

const ALLOWED = new Set([200, 204, 400, 401, 404, 413, 429, 503]);
/** On raw sockets also: 101 to a well-formed WebSocket upgrade. */
const ALLOWED_RAW = new Set([...ALLOWED, 101]);

type Creds = { id: string; key: string; secret: string };
/** The main app: a bucket too large to run dry, so signed requests reach validation. */
const MAIN = { ...APP, max_client_events_per_second: 1_000_000 };
/** Small limits (413s, batch and channel counts) and a small bucket (429s). */
const LIM = {
  id: 'lim-id', key: 'lim-key', secret: 'lim-secret',
  max_event_channels_at_once: 2, max_event_payload_in_kb: 1, max_event_batch_size: 3,
  max_client_events_per_second: 20, max_backend_events_per_second: 30,
};
const OFF = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };
const SECRETS = [MAIN.secret, LIM.secret, OFF.secret];

// ---------------------------------------------------------------------------------------
// Requests.

interface HttpCase {
  route: string;
  method: string;
  /** Path as sent (percent-encoded or not). */
  path: string;
  /** Raw query string, without '?'. */
  query: string;
  headers: Record<string, string>;
  body: Buffer | null;
  /** Correctly signed for a known app: a 401 means the signature did not survive the trip. */
  signed?: boolean;
  /** For requests that must succeed: null when the answer is right, else what is wrong. */
  control?: (status: number, json: any) => string | null;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function describe(c: HttpCase): string {
  const body = c.body === null ? '' : ` body(${c.body.length}): ${clip(c.body.toString('utf8'), 200)}`;
  return `${c.method} ${clip(c.path + (c.query ? '?' + c.query : ''), 300)} headers ${clip(JSON.stringify(c.headers), 200)}${body}`;
}

const nowS = () => Math.floor(Date.now() / 1000);

/** The query parameters as the server reads them (URLSearchParams, keys lowercased; the last of a repeated key). */
function serverParams(query: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(query)) m.set(k.toLowerCase(), v);
  return m;
}

/** The signed query string for raw parts (in any order, any encoding): the signature is over what the server decodes. */
function signRaw(app: Creds, method: string, path: string, parts: string[], body: Buffer | null, rng: Rng): string {
  const all = [`auth_key=${encode(app.key)}`, `auth_timestamp=${nowS()}`, 'auth_version=1.0', ...parts];
  if (body !== null && body.length > 0) all.push(`body_md5=${md5Hex(body)}`);
  // any order: the server sorts
  for (let i = all.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [all[i], all[j]] = [all[j], all[i]];
  }
  const q = all.join('&');
  const sig = hmacSha256Hex(app.secret, apiStringToSign(method, path, serverParams(q)));
  return `${q}&auth_signature=${rng.bool(0.05) ? sig.toUpperCase() : sig}`;
}

/** Header values Node's client accepts (no CR, LF, NUL or characters past latin1). */
function headerSafe(s: string): string {
  return s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '?');
}

/**
 * Printable ASCII only: Node's client refuses spaces and controls, and sends characters
 * 0x80–0xff as single (latin1) bytes, which the server reads as UTF-8 — the request would
 * no longer be the one signed. Bad percent-encodings ('%zz') are kept.
 */
function pathSafe(s: string): string {
  return s.replace(/[^\x21-\x7e]/g, (ch) => encode(ch));
}

/** pathSafe for one path segment: '?' would start the query. */
function segSafe(s: string): string {
  return pathSafe(s).replace(/\?/g, '%3F');
}

const POOL = ['fuzz-pub', 'private-fuzz', 'presence-fuzz', 'cache-fuzz', 'fuzz#cache-60', '#server-to-user-u1', 'presence-cache-fuzz'];

/** A query parameter name=value, encoded in one of several ways (some of them wrong). */
function rawParam(rng: Rng, key: string, value: string): string {
  return pathSafe(rawParamAnyChars(rng, key, value));
}

function rawParamAnyChars(rng: Rng, key: string, value: string): string {
  switch (rng.int(8)) {
    case 0: return `${key.replace(/[&#=]/g, '_')}=${value.replace(/[&#]/g, '_')}`; // raw, whatever it holds
    case 1: return `${encode(key)}=${encode(value)}%zz`;
    case 2: return `${encode(key)}=${encode(value).replace(/%20/g, '+')}`;
    case 3: return `${encode(key).toUpperCase()}=${encode(value)}`;
    default: return `${encode(key)}=${encode(value)}`;
  }
}

function junkParams(rng: Rng): string[] {
  const out: string[] = [];
  const n = rng.weighted([[6, 0], [3, 1], [1, 3]]);
  for (let i = 0; i < n; i++) {
    switch (rng.int(8)) {
      case 0: out.push(rawParam(rng, randString(rng, 30), randString(rng, 100))); break;
      case 1: out.push(`x=${'v'.repeat(rng.range(1000, 30_000))}`); break;
      case 2: out.push(rng.pick(['%zz=1', '%=%', 'a=%', 'a=%e2%82', '=', '&', '==&==', 'a', 'a=b=c', '%00=%00', '+=+', 'a[]=1&a[]=2', '__proto__=1', 'constructor=x'])); break;
      case 3: out.push(rng.pick(['auth_key=app-key', 'AUTH_KEY=app-key', 'auth_signature=', 'body_md5=', 'auth_version=1.0', 'Auth_Timestamp=1'])); break;
      case 4: out.push(`info=${encode(rng.pick(['user_count', 'subscription_count', '', 'x']))}`); break;
      default: out.push(rawParam(rng, randName(rng, rng.range(1, 10)), randString(rng, 50)));
    }
  }
  return out.map(pathSafe);
}

function infoParam(rng: Rng): string {
  return rng.pick(['user_count', 'subscription_count', 'user_count,subscription_count', 'subscription_count,user_count', '', ',', ' user_count ', 'cache', 'x', 'USER_COUNT', 'user_count,x', randString(rng, 50), 'x'.repeat(5000)]);
}

/** A valid event for the app, before mutation. */
function baseEvent(rng: Rng, lim: boolean): Record<string, unknown> {
  const ev: Record<string, unknown> = { name: rng.pick(['fuzz-ev', 'my-event', 'e', randName(rng, rng.range(1, 50))]) };
  if (rng.bool(0.7)) ev.channel = randChannel(rng, POOL);
  else ev.channels = Array.from({ length: rng.range(1, lim ? 3 : 5) }, () => randChannel(rng, POOL));
  ev.data = rng.bool() ? JSON.stringify(randJson(rng, 2)) : randJson(rng, 2);
  if (rng.bool(0.2)) ev.socket_id = rng.pick(['123.456', '1.1', '0.0', '', '123', 'a.b', '123.456.789', ' 1.2', '1'.repeat(70) + '.1', junkValue(rng)]);
  if (rng.bool(0.2)) ev.info = rng.bool(0.7) ? infoParam(rng) : junkValue(rng);
  return ev;
}

const EVENT_KEYS = ['name', 'data', 'channel', 'channels', 'socket_id', 'info'];

/** A body for POST /events: valid-ish with mutated fields, random JSON, bytes, deep, huge numbers, big. */
function eventBody(rng: Rng, lim: boolean): Buffer {
  const b = (s: string) => Buffer.from(s, 'utf8');
  const kind = rng.weighted<string>([
    [35, 'mutated'], [10, 'valid-ish'], [8, 'random-json'], [4, 'bytes'], [10, 'text'], [4, 'deep'],
    [4, 'numbers'], [3, 'big'], [2, 'empty'], [4, 'odd-channels'], [3, 'odd-name'],
  ]);
  switch (kind) {
    case 'mutated': return b(JSON.stringify(mutateObject(rng, baseEvent(rng, lim), EVENT_KEYS)));
    case 'valid-ish': return b(JSON.stringify(baseEvent(rng, lim)));
    case 'random-json': return b(JSON.stringify(randJson(rng, 4)));
    case 'bytes': return rng.bytes(rng.range(0, 2000));
    case 'text': {
      let s = JSON.stringify(baseEvent(rng, lim));
      for (let i = rng.range(1, 3); i > 0; i--) s = mutateText(rng, s);
      return b(s);
    }
    case 'deep': {
      const d = deepJson(rng, rng.range(1000, 40_000));
      return b(rng.pick([
        `{"name":"e","channel":"fuzz-pub","data":${d}}`,
        d,
        `{"name":"e","channels":${d},"data":"x"}`,
        `{"name":${d},"channel":"fuzz-pub","data":"x"}`,
        `{"name":"e","channel":"fuzz-pub","data":"x","info":${d}}`,
        `{"name":"e","channel":"fuzz-pub","data":{"a":[1,${d}]}}`,
      ]));
    }
    case 'numbers':
      return b(rng.pick([
        '{"name":"e","channel":"fuzz-pub","data":1e999}',
        '{"name":"e","channel":"fuzz-pub","data":-1e999}',
        '{"name":"e","channel":"fuzz-pub","data":123456789012345678901234567890123456789}',
        '{"name":"e","channel":"fuzz-pub","data":1e-400}',
        '{"name":1e999,"channel":"fuzz-pub","data":"x"}',
        '{"name":"e","channel":1e999,"data":"x"}',
        '{"name":"e","channels":[1e999],"data":"x"}',
        '{"name":"e","channel":"fuzz-pub","data":"x","socket_id":1e999}',
        '{"name":"e","channel":"fuzz-pub","data":"x","socket_id":123.456}',
        '{"name":"e","channel":"fuzz-pub","data":"x","info":1e999}',
        `{"name":"e","channel":"fuzz-pub","data":${rng.pick(NASTY_NUMBERS)}}`,
      ]));
    case 'big': {
      const n = lim ? rng.range(900, 1200) : rng.range(99 * 1024, 101 * 1024);
      return b(JSON.stringify({ name: 'big', channel: 'fuzz-pub', data: rng.pick(['x', 'é', '💩', '"']).repeat(Math.floor(n / 2)) }));
    }
    case 'empty': return b(rng.pick(['', ' ', '\n', 'null', '{}', '[]', '""', '0']));
    case 'odd-channels': {
      const ev = baseEvent(rng, lim);
      delete ev.channel;
      ev.channels = rng.pick<unknown>([
        [], ['fuzz-pub', 'fuzz-pub'], Array.from({ length: rng.range(3, 120) }, (_, i) => `c${i}`),
        [null], [1, 2], [['nested']], [{}], 'fuzz-pub', { 0: 'fuzz-pub', length: 1 }, ['x'.repeat(201)], ['#server-to-user-'],
        ['a#cache-0'], ['#cache-60'], ['presence-' + 'p'.repeat(191)],
      ]);
      if (rng.bool(0.3)) ev.channel = junkValue(rng);
      return b(JSON.stringify(ev));
    }
    default: {
      const ev = baseEvent(rng, lim);
      ev.name = rng.pick<unknown>(['', 'client-x', 'x'.repeat(200), 'x'.repeat(201), 'pusher:subscribe', 'pusher_internal:x', '💩'.repeat(100), '\u0000', null, 1, [], {}]);
      return b(JSON.stringify(ev));
    }
  }
}

function batchBody(rng: Rng, lim: boolean): Buffer {
  switch (rng.int(7)) {
    case 0: return Buffer.from(JSON.stringify({ batch: junkValue(rng) }));
    case 1: return Buffer.from(JSON.stringify(randJson(rng, 3)));
    case 2: return Buffer.from(`{"batch":[${deepJson(rng, rng.range(1000, 30_000))}]}`);
    case 3: return Buffer.from(`{"batch":[{"name":"e","channel":"fuzz-pub","data":${deepJson(rng, rng.range(1000, 30_000))}}]}`);
    default: {
      const n = rng.weighted([[2, 0], [10, rng.range(1, 3)], [4, rng.range(4, 12)], [1, rng.range(50, 200)]]);
      const items = Array.from({ length: n }, () => {
        const e = rng.bool(0.5) ? baseEvent(rng, lim) : mutateObject(rng, baseEvent(rng, lim), EVENT_KEYS);
        return rng.bool(0.05) ? junkValue(rng) : e;
      });
      const text = JSON.stringify(rng.bool(0.9) ? { batch: items } : mutateObject(rng, { batch: items }));
      return Buffer.from(rng.bool(0.1) ? mutateText(rng, text) : text);
    }
  }
}

function pickApp(rng: Rng): { seg: string; creds: Creds | null; lim: boolean } {
  return rng.weighted<{ seg: string; creds: Creds | null; lim: boolean }>([
    [80, { seg: MAIN.id, creds: MAIN, lim: false }],
    [6, { seg: LIM.id, creds: LIM, lim: true }],
    [4, { seg: OFF.id, creds: OFF, lim: false }],
    [3, { seg: 'app%2Did', creds: MAIN, lim: false }],
    [4, { seg: segSafe(encode(randString(rng, 40))), creds: MAIN, lim: false }],
    [3, { seg: rng.pick(['%zz', '%', '', 'APP-ID', 'app-id%00', '..', 'app-id;x', encode('é')]), creds: MAIN, lim: false }],
  ]);
}

function channelSeg(rng: Rng): string {
  const c = randChannel(rng, POOL);
  switch (rng.int(10)) {
    case 0: return segSafe(c);
    case 1: return encode(c) + '%zz';
    case 2: return encode(c).replace(/%23/g, '#');
    case 3: return encode(c).toLowerCase();
    default: return encode(c);
  }
}

function randomHeaders(rng: Rng, hasBody: boolean): Record<string, string> {
  const h: Record<string, string> = {};
  if (hasBody || rng.bool(0.1)) {
    h['content-type'] = rng.weighted([[8, 'application/json'], [1, 'text/plain'], [1, 'application/json; charset=utf-16'], [1, 'multipart/form-data; boundary=x'], [1, headerSafe(randString(rng, 50))]]);
  }
  if (rng.bool(0.1)) h.origin = headerSafe(rng.pick(['https://a.example', 'null', '*', randString(rng, 60)]));
  if (rng.bool(0.05)) h['x-forwarded-for'] = headerSafe(rng.pick(['1.2.3.4', '1.2.3.4, 5.6.7.8', '', ',,,', 'x'.repeat(3000), randString(rng, 40)]));
  if (rng.bool(0.05)) h.accept = headerSafe(randString(rng, 40));
  if (rng.bool(0.03)) h['x-junk'] = 'j'.repeat(rng.range(100, 8000));
  if (rng.bool(0.03)) h['accept-encoding'] = 'gzip, deflate, br';
  if (rng.bool(0.03)) h.cookie = headerSafe(randString(rng, 200));
  return h;
}

const AUTH_PARAMS = new Set(['auth_key', 'auth_timestamp', 'auth_version', 'auth_signature', 'body_md5']);

/** True when junk parameters repeat or override the auth ones (the request is then not signed as such). */
function overridesAuth(parts: string[]): boolean {
  return [...new URLSearchParams(parts.join('&')).keys()].some((k) => AUTH_PARAMS.has(k.toLowerCase()));
}

/** Signs (or corrupts, or leaves unsigned) an API request in place. */
function authorize(rng: Rng, c: HttpCase, creds: Creds | null, parts: string[]): void {
  const mode = creds === null ? 'unsigned' : rng.weighted<string>([[72, 'signed'], [5, 'header'], [15, 'corrupt'], [8, 'unsigned']]);
  if (mode === 'unsigned' || creds === null) {
    c.query = [...parts, ...(rng.bool(0.5) ? junkParams(rng) : [])].join('&');
    if (rng.bool(0.1)) c.headers.authorization = headerSafe(rng.pick(['', 'x', 'app-key:', ':abc', 'Bearer x', 'app-key:' + 'a'.repeat(64), randString(rng, 80)]));
    return;
  }
  if (mode === 'header') {
    const q = [`auth_timestamp=${nowS()}`, 'auth_version=1.0', ...parts];
    if (c.body !== null && c.body.length > 0) q.push(`body_md5=${md5Hex(c.body)}`);
    c.query = q.join('&');
    const withKey = serverParams(c.query);
    c.headers.authorization = `${creds.key}:${hmacSha256Hex(creds.secret, apiStringToSign(c.method, c.path, withKey))}`;
    c.signed = !overridesAuth(parts);
    return;
  }
  c.query = signRaw(creds, c.method, c.path, parts, c.body, rng);
  if (mode === 'signed') {
    c.signed = !overridesAuth(parts);
    return;
  }
  // corrupt one thing
  switch (rng.int(12)) {
    case 0: c.query = c.query.replace(/auth_signature=(.)/, (_m, ch: string) => `auth_signature=${ch === '0' ? '1' : '0'}`); break;
    case 1: c.query = c.query.replace(/auth_timestamp=\d+/, `auth_timestamp=${rng.pick([String(nowS() - 700), String(nowS() + 700), 'abc', '1e20', '-1', '', '99999999999999999999', '%201', '1.5'])}`); break;
    case 2: c.query = c.query.replace('auth_version=1.0', `auth_version=${rng.pick(['2.0', '', '1', '1.0.0'])}`); break;
    case 3: c.query = c.query.replace(/body_md5=[0-9a-f]+/, 'body_md5=' + '0'.repeat(32)); break;
    case 4: c.query = c.query.replace(/&?auth_signature=[0-9a-fA-F]+/, ''); break;
    case 5: c.query += '&' + rng.pick(['extra=1', 'auth_key=app-key', 'AUTH_SIGNATURE=x', 'info=user_count']); break;
    case 6: c.query = c.query.replace(/auth_key=[^&]*/, `auth_key=${rng.pick(['lim-key', 'off-key', 'nope', '', encode(randString(rng))])}`); break;
    case 7: c.headers.authorization = headerSafe(rng.pick(['app-key:abc', 'x', ':', randString(rng, 60)])); break;
    case 8: if (c.body !== null) c.body = Buffer.concat([c.body, Buffer.from(' ')]); break;
    case 9: c.query = c.query.replace(/auth_key=/, 'auth_key=%zz'); break;
    case 10: c.query = '&&' + c.query + '&'; break;
    default: c.query = c.query.replace(/auth_signature=/, 'auth_signature=%'); break;
  }
}

/** Valid requests whose answer is known: each must come back 200 with the right shape. */
function controlCase(rng: Rng): HttpCase {
  const n = rng.int(4);
  if (n === 0) {
    const path = `/apps/${MAIN.id}/events`;
    const body = JSON.stringify({ name: 'ctl', channel: 'ctl-' + rng.int(10), data: JSON.stringify({ n: rng.int(1000) }) });
    return {
      route: 'control events', method: 'POST', path, query: signApiQuery(MAIN.key, MAIN.secret, 'POST', path, {}, body, nowS()),
      headers: { 'content-type': 'application/json' }, body: Buffer.from(body),
      control: (s, j) => (s === 200 && j?.ok === true ? null : 'expected 200 {"ok":true}'),
    };
  }
  if (n === 1) {
    const path = `/apps/${MAIN.id}/batch_events`;
    const body = JSON.stringify({ batch: [{ name: 'ctl', channel: 'ctl-b', data: '{}' }, { name: 'ctl', channel: 'ctl-c', data: '{}', info: 'subscription_count' }] });
    return {
      route: 'control batch', method: 'POST', path, query: signApiQuery(MAIN.key, MAIN.secret, 'POST', path, {}, body, nowS()),
      headers: { 'content-type': 'application/json' }, body: Buffer.from(body),
      control: (s, j) => (s === 200 && Array.isArray(j?.batch) && j.batch.length === 2 && typeof j.batch[1].subscription_count === 'number' ? null : 'expected 200 {"batch":[{},{subscription_count}]}'),
    };
  }
  if (n === 2) {
    const path = `/apps/${MAIN.id}/channels`;
    return {
      route: 'control channels', method: 'GET', path, query: signApiQuery(MAIN.key, MAIN.secret, 'GET', path, { filter_by_prefix: 'presence-', info: 'user_count' }, '', nowS()),
      headers: {}, body: null,
      control: (s, j) => (s === 200 && j?.channels && typeof j.channels === 'object' ? null : 'expected 200 {"channels":{…}}'),
    };
  }
  const path = `/apps/${MAIN.id}/channels/${encodeURIComponent('fuzz#cache-60')}`;
  return {
    route: 'control channel', method: 'GET', path, query: signApiQuery(MAIN.key, MAIN.secret, 'GET', path, { info: 'subscription_count' }, '', nowS()),
    headers: {}, body: null,
    control: (s, j) => (s === 200 && typeof j?.occupied === 'boolean' && typeof j.subscription_count === 'number' ? null : 'expected 200 {"occupied","subscription_count"}'),
  };
}

function genCase(rng: Rng): HttpCase {
  const route = rng.weighted<string>([
    [26, 'events'], [13, 'batch'], [9, 'channels'], [9, 'channel'], [7, 'users'], [4, 'terminate'],
    [2, 'up'], [3, 'up-id'], [5, 'unknown'], [3, 'options'], [4, 'wrong-method'], [5, 'odd-path'], [10, 'control'],
  ]);
  if (route === 'control') return controlCase(rng);
  const app = pickApp(rng);
  const c: HttpCase = { route, method: 'GET', path: '', query: '', headers: {}, body: null };
  const parts: string[] = [];
  switch (route) {
    case 'events':
      c.method = 'POST';
      c.path = `/apps/${app.seg}/events`;
      c.body = eventBody(rng, app.lim);
      break;
    case 'batch':
      c.method = 'POST';
      c.path = `/apps/${app.seg}/batch_events`;
      c.body = batchBody(rng, app.lim);
      break;
    case 'channels':
      c.path = `/apps/${app.seg}/channels`;
      if (rng.bool(0.6)) parts.push(rawParam(rng, 'filter_by_prefix', rng.pick(['presence-', 'private-', '', '#', 'fuzz', randString(rng, 50)])));
      if (rng.bool(0.5)) parts.push(rawParam(rng, 'info', infoParam(rng)));
      break;
    case 'channel':
      c.path = `/apps/${app.seg}/channels/${channelSeg(rng)}`;
      if (rng.bool(0.6)) parts.push(rawParam(rng, 'info', infoParam(rng)));
      break;
    case 'users':
      c.path = `/apps/${app.seg}/channels/${channelSeg(rng)}/users`;
      break;
    case 'terminate':
      c.method = 'POST';
      c.path = `/apps/${app.seg}/users/${rng.bool(0.8) ? encode(randString(rng, 60)) : rng.pick(['%zz', 'u1', '%00', encode('💩')])}/terminate_connections`;
      if (rng.bool(0.3)) c.body = Buffer.from(rng.bool() ? '{}' : JSON.stringify(randJson(rng, 2)));
      break;
    case 'up':
      c.path = '/up';
      c.query = rng.bool(0.5) ? junkParams(rng).join('&') : '';
      c.headers = randomHeaders(rng, false);
      return c;
    case 'up-id':
      c.path = `/up/${app.seg}`;
      c.query = rng.bool(0.3) ? junkParams(rng).join('&') : '';
      c.headers = randomHeaders(rng, false);
      return c;
    case 'unknown': {
      c.method = rng.pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'PROPFIND', 'TRACE', 'BREW', 'get']);
      c.path = rng.pick(['/', '/apps', '/apps/', `/apps/${app.seg}`, `/apps/${app.seg}/`, '/metrics', '/app', '/favicon.ico', '/up/', '/up/a/b', `/apps/${app.seg}/events/x`, '/' + pathSafe(encode(randString(rng, 100)))]);
      if (c.method !== 'GET' && c.method !== 'HEAD' && rng.bool(0.5)) c.body = Buffer.from(JSON.stringify(randJson(rng, 2)));
      c.query = rng.bool(0.3) ? junkParams(rng).join('&') : '';
      c.headers = randomHeaders(rng, c.body !== null);
      return c;
    }
    case 'options':
      c.method = 'OPTIONS';
      c.path = rng.pick(['/', '/up', `/apps/${app.seg}/events`, `/apps/${app.seg}/channels/${channelSeg(rng)}`, '/' + pathSafe(encode(randString(rng, 50)))]);
      c.headers = { origin: headerSafe(rng.pick(['https://a.example', 'null', randString(rng, 40)])), 'access-control-request-method': rng.pick(['POST', 'GET', 'DELETE', 'X']), 'access-control-request-headers': rng.pick(['content-type', 'authorization, x-socket-id', headerSafe(randString(rng, 40))]) };
      return c;
    case 'wrong-method': {
      const [m, p] = rng.pick<[string, string]>([
        ['GET', `/apps/${app.seg}/events`], ['GET', `/apps/${app.seg}/batch_events`], ['POST', `/apps/${app.seg}/channels`],
        ['PUT', `/apps/${app.seg}/events`], ['DELETE', `/apps/${app.seg}/channels/fuzz-pub`], ['PATCH', `/apps/${app.seg}/events`],
        ['HEAD', `/apps/${app.seg}/channels`], ['GET', `/apps/${app.seg}/users/u1/terminate_connections`],
      ]);
      c.method = m;
      c.path = p;
      if (m !== 'GET' && m !== 'HEAD' && rng.bool(0.5)) c.body = eventBody(rng, false);
      break;
    }
    default: { // odd paths to the API routes
      c.method = rng.bool() ? 'GET' : 'POST';
      c.path = rng.pick([
        `/apps/${app.seg}//channels`, `/apps/${app.seg}/channels/`, `//apps/${app.seg}/channels`, `/apps/${app.seg}/./channels`,
        `/apps/${app.seg}/../${app.seg}/channels`, `/APPS/${app.seg}/channels`, `/apps/${app.seg}/channels/${'c'.repeat(rng.range(200, 10_000))}`,
        `/apps/${app.seg}/channels/${encode('presence-' + randString(rng, 20))}/users/`, `/apps/${app.seg}/channels/%2F/users`,
        `/apps/${app.seg}/channels/a%2Fb`, `/apps/${app.seg}/events%00`, `/apps/${app.seg}/channels;x=y`,
      ]);
      if (c.method === 'POST') c.body = eventBody(rng, false);
    }
  }
  if (rng.bool(0.15)) parts.push(...junkParams(rng));
  c.headers = randomHeaders(rng, c.body !== null);
  authorize(rng, c, app.creds, parts);
  return c;
}

/** Methods uWS knows; it closes the connection, without an answer, on any other. */
const KNOWN_METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE', 'CONNECT']);

function send(agent: http.Agent, port: number, c: HttpCase): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...c.headers };
    if (c.body !== null) headers['content-length'] = c.body.length;
    // HEAD is answered with a body (see the report), which would corrupt the next answer on
    // a kept-alive connection; unknown methods close it. Both go on a connection of their own.
    const own = c.method === 'HEAD' || !KNOWN_METHODS.has(c.method);
    const req = http.request({
      host: '127.0.0.1', port, method: c.method, path: c.path + (c.query ? '?' + c.query : ''), agent: own ? false : agent, headers,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.end(c.body ?? undefined);
  });
}

// ---------------------------------------------------------------------------------------
// Checks.

class Report extends FuzzReport {
  readonly statuses = new Map<string, number>();
  readonly raw = new Map<string, number>();
  /** Signed requests answered 401 (not failures: recorded to see what the signature does not cover). */
  readonly signed401: string[] = [];
  cases = 0;
}

/** null when a non-2xx body is {"error": "<string>"} without a stack trace or a secret. */
function checkErrorBody(text: string, contentType: string | undefined): string | null {
  let j: any;
  try {
    j = JSON.parse(text);
  } catch {
    return `error body is not JSON: ${clip(text, 200)}`;
  }
  if (j === null || typeof j !== 'object' || Array.isArray(j)) return `error body is not a JSON object: ${clip(text, 200)}`;
  const keys = Object.keys(j);
  if (keys.length !== 1 || keys[0] !== 'error' || typeof j.error !== 'string' || j.error === '') return `error body is not {"error": "<string>"}: ${clip(text, 200)}`;
  if (/\n\s+at |\bat .+\.(js|ts):\d+|node:internal/.test(j.error)) return `error message looks like a stack trace: ${clip(j.error, 300)}`;
  for (const s of SECRETS) if (j.error.includes(s)) return 'error message contains an app secret';
  if (contentType !== undefined && !contentType.startsWith('application/json')) return `error body has Content-Type ${contentType}`;
  return null;
}

function checkAnswer(report: Report, c: HttpCase, a: Answer): void {
  report.count(report.statuses, `${c.route} ${a.status}`);
  if (!ALLOWED.has(a.status)) return report.problem(`status ${a.status} for ${describe(c)} — body ${clip(a.text, 300)}`);
  const head = c.method === 'HEAD';
  if (a.status >= 300 && !head) {
    const bad = checkErrorBody(a.text, a.headers['content-type']);
    if (bad) return report.problem(`${a.status}: ${bad} — for ${describe(c)}`);
  }
  let json: any;
  if (a.status === 200 && !head) {
    try {
      json = JSON.parse(a.text);
    } catch {
      return report.problem(`200 with a body that is not JSON (${clip(a.text, 200)}) for ${describe(c)}`);
    }
  }
  if (a.status === 204 && c.method !== 'OPTIONS') report.problem(`204 for ${describe(c)}`);
  if (a.status === 429 && !a.headers['retry-after']) report.problem(`429 without Retry-After for ${describe(c)}`);
  if (c.signed && a.status === 401) {
    report.count(report.statuses, `${c.route} signed→401`);
    if (report.signed401.length < 10) report.signed401.push(`${clip(a.text, 200)} for ${describe(c)}`);
  }
  if (c.control) {
    const wrong = c.control(a.status, json);
    if (wrong) report.problem(`control request: ${wrong}, got ${a.status} ${clip(a.text, 200)} for ${describe(c)}`);
  }
}

// ---------------------------------------------------------------------------------------
// Raw sockets: what a client library cannot send.

const CRLF = '\r\n';

interface RawCase {
  data: Buffer;
  /** That many requests, each of which must be answered 200. */
  answers?: number;
  /** That many pipelined API requests: answered 200, or the connection closed (recorded). */
  pipelined?: number;
}

function rawCase(rng: Rng, port: number): RawCase {
  const r = rawCaseData(rng, port);
  return Buffer.isBuffer(r) ? { data: r } : r;
}

function rawCaseData(rng: Rng, port: number): Buffer | RawCase {
  const host = `Host: 127.0.0.1:${port}`;
  const signedGet = () => {
    const path = `/apps/${MAIN.id}/channels`;
    return `GET ${path}?${signApiQuery(MAIN.key, MAIN.secret, 'GET', path, {}, '', nowS())} HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`;
  };
  const signedPost = (body: string) => {
    const path = `/apps/${MAIN.id}/events`;
    return `POST ${path}?${signApiQuery(MAIN.key, MAIN.secret, 'POST', path, {}, body, nowS())} HTTP/1.1${CRLF}${host}${CRLF}Content-Type: application/json${CRLF}Content-Length: ${Buffer.byteLength(body)}${CRLF}${CRLF}${body}`;
  };
  const evBody = JSON.stringify({ name: 'raw', channel: 'fuzz-pub', data: '{}' });
  const bodyPath = `/apps/${MAIN.id}/events?${signApiQuery(MAIN.key, MAIN.secret, 'POST', `/apps/${MAIN.id}/events`, {}, evBody, nowS())}`;
  const kind = rng.int(25);
  switch (kind) {
    case 0: return Buffer.from(`${rng.pick(['GARBAGE', 'get', 'G ET', 'GET\u0000', 'X'.repeat(5000), ''])} /up HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`, 'latin1');
    case 1: return Buffer.from(`GET ${rng.pick(['*', 'up', 'http://127.0.0.1/up', '/up#frag', '/u p', '/up\u0000', '/' + 'a'.repeat(rng.range(5000, 70_000)), '/%', '/%zz', '/\u00ff'])} HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`, 'latin1');
    case 2: return Buffer.from(`GET /up ${rng.pick(['HTTP/1.0', 'HTTP/2', 'HTTP/1.1x', 'HTTP/9.9', 'HTTP', '', 'http/1.1'])}${CRLF}${host}${CRLF}${CRLF}`);
    case 3: return Buffer.from(`GET /up HTTP/1.1${CRLF}${CRLF}`); // no Host
    case 4: return Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}${rng.pick(['NoColon', ': novalue', 'X : spaced', 'X:\u0000', 'X: a\u0000b', ' folded: x', 'X: 1' + CRLF + ' continued', 'X\u00ff: y', '\u0000: x'])}${CRLF}${CRLF}`, 'latin1');
    case 5: return Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}X-Big: ${'b'.repeat(rng.range(4000, 200_000))}${CRLF}${CRLF}`);
    case 6: return Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}${Array.from({ length: rng.range(50, 1000) }, (_, i) => `H${i}: v`).join(CRLF)}${CRLF}${CRLF}`);
    case 7: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Content-Length: ${rng.pick(['-1', 'abc', '', ' 5', '1e3', '0x10', '99999999999999999999', '18446744073709551616', '+5', '5, 5'])}${CRLF}${CRLF}${evBody}`);
    case 8: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Content-Length: ${Buffer.byteLength(evBody) - rng.range(1, 10)}${CRLF}${CRLF}${evBody}`); // shorter: the rest is the next "request"
    case 9: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Content-Length: ${Buffer.byteLength(evBody)}${CRLF}Content-Length: ${Buffer.byteLength(evBody) + rng.range(-5, 5)}${CRLF}${CRLF}${evBody}`);
    case 10: {
      const n = Buffer.byteLength(evBody).toString(16);
      return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}${rng.pick([`${n}${CRLF}${evBody}${CRLF}0${CRLF}${CRLF}`, `zz${CRLF}${evBody}${CRLF}0${CRLF}${CRLF}`, `${n}${CRLF}${evBody}`, `1${CRLF}${evBody}${CRLF}0${CRLF}${CRLF}`, `ffffffffffffffff${CRLF}x`, `-1${CRLF}x${CRLF}`])}`);
    }
    case 11: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Transfer-Encoding: chunked${CRLF}Content-Length: 3${CRLF}${CRLF}${Buffer.byteLength(evBody).toString(16)}${CRLF}${evBody}${CRLF}0${CRLF}${CRLF}`);
    case 12: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Transfer-Encoding: ${rng.pick(['gzip', 'chunked, gzip', 'identity', 'xchunked', 'chunked\u0000'])}${CRLF}Content-Length: ${Buffer.byteLength(evBody)}${CRLF}${CRLF}${evBody}`, 'latin1');
    case 13: return rng.bytes(rng.range(1, 3000));
    case 14: return Buffer.concat([Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`), rng.bytes(rng.range(1, 500))]);
    case 15: return Buffer.from(`GET /up HTTP/1.1\n${host}\n\n`); // bare LF
    case 16: return Buffer.from(`${CRLF}${CRLF}${CRLF}GET /up HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`);
    case 17: { // several signed API requests pipelined: uWS refuses pipelining behind an async answer (recorded)
      const n = rng.range(2, 6);
      return { data: Buffer.from(Array.from({ length: n }, () => (rng.bool() ? signedGet() : signedPost(evBody))).join('')), pipelined: n };
    }
    case 24: { // GET /up pipelined (answered synchronously): every one answered, in order
      const n = rng.range(2, 8);
      return { data: Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`.repeat(n)), answers: n };
    }
    case 18: // pipelined, then garbage
      return Buffer.from(signedGet() + rng.pick(['GARBAGE\r\n\r\n', 'GET /up HTTP/1.1\r\n\r\n', '\u0000\u0001', signedPost(evBody).slice(0, rng.range(10, 200))]), 'latin1');
    case 19: return Buffer.from(`GET /app/${APP.key} HTTP/1.1${CRLF}${host}${CRLF}Upgrade: websocket${CRLF}Connection: Upgrade${CRLF}${rng.pick(['', `Sec-WebSocket-Key: x${CRLF}`, `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==${CRLF}Sec-WebSocket-Version: ${rng.pick(['13', '8', 'x', ''])}${CRLF}`])}${CRLF}`);
    case 20: return Buffer.from(`POST ${bodyPath} HTTP/1.1${CRLF}${host}${CRLF}Expect: 100-continue${CRLF}Content-Length: ${Buffer.byteLength(evBody)}${CRLF}${CRLF}${evBody}`);
    case 21: return Buffer.from(`GET /up HTTP/1.1${CRLF}${host}${CRLF}${host}${CRLF}Host: other${CRLF}${CRLF}`);
    case 22: return Buffer.from(`OPTIONS * HTTP/1.1${CRLF}${host}${CRLF}${CRLF}`);
    default: return Buffer.from(`${rng.pick(['GET', 'POST', 'HEAD', 'DELETE'])} ${rng.pick(['/up', `/apps/${MAIN.id}/channels`, bodyPath])} HTTP/1.1${CRLF}${host}${CRLF}Connection: ${rng.pick(['close', 'keep-alive', 'upgrade', 'x'])}${CRLF}Content-Length: 0${CRLF}${CRLF}`);
  }
}

interface RawResponse { status: number; headers: Record<string, string>; body: Buffer }

/** Splits what came back into HTTP/1.1 responses; the rest (if not a whole response) is returned as `trailing`. */
function parseResponses(buf: Buffer): { responses: RawResponse[]; trailing: Buffer } {
  const out: RawResponse[] = [];
  let off = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', off);
    if (end < 0) break;
    const head = buf.subarray(off, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3})(?: .*)?$/.exec(head[0]);
    if (!m) break;
    if (m[1] === '100') { // interim answer to Expect: 100-continue
      off = end + 4;
      continue;
    }
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const len = Number(headers['content-length'] ?? '0');
    if (end + 4 + len > buf.length) break;
    out.push({ status: Number(m[1]), headers, body: buf.subarray(end + 4, end + 4 + len) });
    off = end + 4 + len;
    if (m[1] === '101') return { responses: out, trailing: Buffer.alloc(0) }; // WebSocket frames follow
  }
  return { responses: out, trailing: buf.subarray(off) };
}

/** `expect`: that many answers are due; wait for them (bounded) rather than a fixed time. */
function rawExchange(port: number, data: Buffer, expect?: number): Promise<{ got: Buffer; how: 'closed' | 'reset' | 'waiting' }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    const s = net.connect(port, '127.0.0.1', () => s.write(data));
    const finish = (how: 'closed' | 'reset' | 'waiting') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ got: Buffer.concat(chunks), how });
    };
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (expect !== undefined && parseResponses(Buffer.concat(chunks)).responses.length >= expect) finish('waiting');
    });
    s.on('error', () => finish('reset'));
    s.on('close', () => finish('closed'));
    const timer = setTimeout(() => finish('waiting'), expect === undefined ? RAW_WAIT_MS : RAW_EXPECTED_WAIT_MS);
  });
}

async function runRaw(report: Report, rng: Rng, port: number, n: number): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: RAW_PARALLEL }, async () => {
    while (next < n) {
      next++;
      const { data, answers, pipelined } = rawCase(rng, port);
      report.cases++;
      const { got, how } = await rawExchange(port, data, answers);
      const { responses, trailing } = parseResponses(got);
      const what = `raw request ${clip(JSON.stringify(data.toString('latin1')), 300)}`;
      for (const r of responses) {
        report.count(report.raw, `answered ${r.status}`);
        if (!ALLOWED_RAW.has(r.status)) {
          report.problem(`status ${r.status} for ${what} — body ${clip(r.body.toString('utf8'), 200)}`);
        } else if (r.status >= 300 && r.body.length > 0) {
          const bad = checkErrorBody(r.body.toString('utf8'), r.headers['content-type']);
          if (bad) report.problem(`${r.status}: ${bad} — for ${what}`);
        }
      }
      if (trailing.length > 0) {
        // A response cut short by the close is fine; bytes that are not HTTP are not.
        if (!trailing.toString('latin1').startsWith('HTTP/1.1 ')) report.problem(`answer that is not HTTP/1.1 (${clip(JSON.stringify(trailing.toString('latin1')), 200)}) for ${what}`);
        else report.count(report.raw, 'answer cut short');
      }
      if (responses.length === 0) report.count(report.raw, `no answer, ${how}`);
      const ok = responses.filter((r) => r.status === 200).length;
      if (answers !== undefined && ok !== answers) {
        report.problem(`${answers} pipelined GET /up, ${ok} answered 200 (${responses.map((r) => r.status).join(',')}; ${how}): ${what}`);
      }
      if (pipelined !== undefined) {
        const wrong = responses.filter((r) => r.status !== 200);
        if (wrong.length > 0) report.problem(`pipelined signed requests answered ${wrong.map((r) => r.status).join(',')}: ${what}`);
        report.count(report.raw, ok === pipelined ? 'pipelined API requests: all answered' : `pipelined API requests: connection ${how} after ${ok} of ${pipelined} answers`);
      }
    }
  }));
}

// ---------------------------------------------------------------------------------------
// Afterwards.

async function stillServes(t: Test, srv: TestServer, before: Set<string>): Promise<void> {
  const up = await getJson(srv.port, '/up');
  t.equal(up.status, 200, 'GET /up answers 200');
  t.equal(up.body?.status, 'ok', 'GET /up says ok');
  t.equal((await getJson(srv.port, `/up/${MAIN.id}`)).status, 200, 'GET /up/app-id answers 200');

  const sub = await RawClient.connect(srv.wsUrl());
  try {
    t.equal((await sub.subscribe('after-fuzz')).event, 'pusher_internal:subscription_succeeded', 'a fresh client subscribes');
    await srv.sdk().trigger('after-fuzz', 'hello', { n: 1 });
    const got = await sub.event('hello', 'after-fuzz', 5000);
    t.same(JSON.parse(got.data), { n: 1 }, 'an event triggered with the SDK reaches the subscriber');
    const list = await srv.sdk().get({ path: '/channels', params: { filter_by_prefix: 'after-' } });
    t.equal(list.status, 200, 'SDK GET /channels answers 200');
    t.ok((await list.json() as any).channels?.['after-fuzz'], 'and lists the subscribed channel');
  } finally {
    await sub.close();
  }
  const prefixes = await livePrefixes(srv, 16 * WORKERS);
  t.equal(prefixes.size, WORKERS, `every shard (${WORKERS}) still accepts connections`);
  t.same([...prefixes].filter((p) => !before.has(p)), [], 'no shard was replaced (a restarted shard has a new socket_id prefix)');
  t.equal(await metric(srv.server.metricsPort!, 'shard_restarts_total'), 0, 'shard_restarts_total is 0');
  t.equal(await metric(srv.server.metricsPort!, 'http_requests_total', { status: '500' }), 0, 'http_requests_total{status="500"} is 0');
}

// ---------------------------------------------------------------------------------------

let srvP: Promise<TestServer> | null = null;
function server(): Promise<TestServer> {
  srvP ??= startServer({
    apps: [MAIN, LIM, OFF],
    // On, as in production (route labels, status labels), and for shard_restarts_total.
    metrics: { enabled: true, host: '127.0.0.1', port: 0 },
  });
  return srvP;
}
t.teardown(async () => {
  if (srvP) await (await srvP).stop();
});

/** One signed POST; the body as given. */
async function signedPost(srv: TestServer, what: 'events' | 'batch_events', body: string): Promise<Answer> {
  const agent = new http.Agent({ keepAlive: false });
  const path = `/apps/${MAIN.id}/${what}`;
  const c: HttpCase = {
    route: what, method: 'POST', path, query: signApiQuery(MAIN.key, MAIN.secret, 'POST', path, {}, body, nowS()),
    headers: { 'content-type': 'application/json' }, body: Buffer.from(body),
  };
  try {
    return await send(agent, srv.port, c);
  } finally {
    agent.destroy();
  }
}

t.test('regressions (deterministic)', async (t) => {
  const srv = await server();
  const deep = '['.repeat(30_000) + ']'.repeat(30_000);

  t.test('POST /events with data nested 30,000 deep answers 400, not 500', async (t) => {
    const r = await signedPost(srv, 'events', `{"name":"e","channel":"fuzz-pub","data":${deep}}`);
    t.equal(r.status, 400, `status (body ${clip(r.text, 200)})`);
    t.equal(checkErrorBody(r.text, r.headers['content-type']), null, 'a JSON {"error"} body');
  });

  t.test('POST /batch_events with an item whose data is nested 30,000 deep answers 400, not 500', async (t) => {
    const r = await signedPost(srv, 'batch_events', `{"batch":[{"name":"e","channel":"fuzz-pub","data":"ok"},{"name":"e","channel":"fuzz-pub","data":{"a":${deep}}}]}`);
    t.equal(r.status, 400, `status (body ${clip(r.text, 200)})`);
    t.equal(checkErrorBody(r.text, r.headers['content-type']), null, 'a JSON {"error"} body');
  });

  t.test('POST /events with channels nested 30,000 deep answers 400, not 500 (the message quoted the channel back)', async (t) => {
    for (const body of [`{"name":"e","channels":${deep},"data":"x"}`, `{"name":"e","channels":[${deep}],"data":"x"}`, `{"name":"e","channel":${deep},"data":"x"}`]) {
      const r = await signedPost(srv, 'events', body);
      t.equal(r.status, 400, `status (body ${clip(r.text, 200)})`);
      t.equal(checkErrorBody(r.text, r.headers['content-type']), null, 'a JSON {"error"} body');
    }
    const b = await signedPost(srv, 'batch_events', `{"batch":[{"name":"e","channels":[${deep}],"data":"x"}]}`);
    t.equal(b.status, 400, `batch status (body ${clip(b.text, 200)})`);
  });

  t.test('a body nested 30,000 deep where an object is expected answers 400', async (t) => {
    const r = await signedPost(srv, 'events', deep);
    t.equal(r.status, 400, `status (body ${clip(r.text, 200)})`);
    const b = await signedPost(srv, 'batch_events', `{"batch":${deep}}`);
    t.equal(b.status, 400, `batch status (body ${clip(b.text, 200)})`);
  });
});

t.test(`http fuzz: seed ${SEED} (FUZZ_SEED=${SEED}), ${HTTP_CASES} requests + ${RAW_CASES} raw-socket requests, ${WORKERS} shard(s)`, async (t) => {
  const srv = await server();
  const before = await livePrefixes(srv, 16 * WORKERS);
  t.equal(before.size, WORKERS, 'every shard accepts connections before the fuzz');
  t.comment(`seed ${SEED}; reproduce with FUZZ_SEED=${SEED}`);
  const started = Date.now();
  const rng = new Rng(SEED);
  const httpRng = rng.fork();
  const rawRng = rng.fork();
  const report = new Report();
  const agent = new http.Agent({ keepAlive: true, maxSockets: AGENT_SOCKETS });

  // A few bodies over the 10 MB limit (413), apart from the random ones.
  const bigBodies = [11 * 1024 * 1024, 10 * 1024 * 1024 + 1].map((n) => {
    const body = Buffer.from(JSON.stringify({ name: 'huge', channel: 'fuzz-pub', data: 'h'.repeat(n) }));
    const path = `/apps/${MAIN.id}/events`;
    const c: HttpCase = { route: 'events over the body limit', method: 'POST', path, query: signApiQuery(MAIN.key, MAIN.secret, 'POST', path, {}, body, nowS()), headers: { 'content-type': 'application/json' }, body };
    return c;
  });

  let next = 0;
  const total = HTTP_CASES;
  await Promise.all([
    ...Array.from({ length: PARALLEL }, async () => {
      while (next < total) {
        const i = next++;
        const c = i < bigBodies.length ? bigBodies[i] : genCase(httpRng.fork());
        report.cases++;
        try {
          checkAnswer(report, c, await send(agent, srv.port, c));
        } catch (err) {
          const msg = (err as Error).message;
          if (!KNOWN_METHODS.has(c.method) && msg === 'socket hang up') {
            report.count(report.statuses, `${c.route} method ${c.method}: closed without an answer`);
          } else if (c.method === 'HEAD' && /Parse Error/.test(msg)) {
            report.count(report.statuses, `${c.route} HEAD: answered with a body`);
          } else {
            report.count(report.statuses, `${c.route} client error`);
            report.problem(`no answer (${msg}) for ${describe(c)}`);
          }
        }
      }
    }),
    runRaw(report, rawRng, srv.port, RAW_CASES),
  ]);
  agent.destroy();
  const ms = Date.now() - started;
  t.comment(`${report.cases} cases (${HTTP_CASES} requests, ${RAW_CASES} raw) in ${ms} ms`);
  t.comment(`statuses: ${report.summary(report.statuses)}`);
  t.comment(`raw sockets: ${report.summary(report.raw)}`);
  for (const n of report.signed401) t.comment(`signed, answered 401: ${n}`);
  t.equal(report.problems.length, 0, `no problems (first ones:\n${report.problems.slice(0, 20).join('\n')})`);
  t.ok(report.cases >= HTTP_CASES + RAW_CASES, 'every case ran');
  const hit = (route: string, status: number) => (report.statuses.get(`${route} ${status}`) ?? 0) > 0;
  t.ok(hit('events', 200) && hit('events', 400) && hit('batch', 200) && hit('channel', 200) && hit('users', 200), 'signed fuzzed requests got past authentication (200s and 400s on the API routes)');

  await stillServes(t, srv, before);
  t.comment(`total ${Date.now() - started} ms`);
});
