// Differential fuzz of the two signed-request verifiers (docs/benchmarks.md,
// "Crypto from a library"): the byte-level shortcut for the SDK's query layout
// (src/protocol/api-auth-fast.ts, verifySdkLayout) and the general check
// (src/protocol/api-auth.ts, verifyAnyLayout). Random query layouts — orders, key case,
// percent-encoding, duplicates, extra and missing parameters, bad hex, wrong timestamps,
// body_md5 mismatches — and random mutations of valid SDK requests go through both.
//
// Expectations:
// - the shortcut never accepts a request the general check refuses, and when it accepts,
//   the general check accepts it with the same auth_key and the same parameters;
// - verifyApiRequest (shortcut, then general) decides as the general check alone does;
// - every plain SDK request (sorted, signature last, ASCII, nothing to encode) is taken
//   by the shortcut (else it would be dead code), and the reference signer below signs
//   as the `pusher` SDK does.
// Counts of who decided what are printed. Pure and in-process (no server). Seeded:
// FUZZ_SEED overrides the seed, FUZZ_SCALE scales the case count.

import { createHash, createHmac } from 'node:crypto';
import Pusher from 'pusher';
import t from 'tap';
import { verifySdkLayout } from '../../src/protocol/api-auth-fast';
import { TIMESTAMP_TOLERANCE_S, verifyAnyLayout, verifyApiRequest, type SignedRequest } from '../../src/protocol/api-auth';
import { FuzzReport } from '../helpers/fuzz-report';
import { fuzzCases, fuzzSeed, Rng } from './gen';

const SEED = fuzzSeed(0x5d1ff);
const CASES = fuzzCases(30000);
const NOW = 1353088179;

const APPS = [
  { key: '278d425bdf160c739803', secret: '7ad3773142a6692b25b8' },
  { key: 'app-key', secret: 'app-secret' },
  { key: 'k3', secret: 's'.repeat(100) }, // longer than a SHA-256 block: hashed first (RFC 2104)
  { key: 'clé', secret: 'sécret-🔑' }, // non-ASCII: in a query only percent-encoded, or raw (declined by the shortcut)
];
const lookup = (k: string): string | null => APPS.find((a) => a.key === k)?.secret ?? null;

/** What a client means to send, before it is laid out as a query. */
interface Intent {
  method: string;
  path: string;
  /** The path the client signed (the sent path, or its decoded form). */
  signedPath: string;
  /** Every parameter but auth_signature, keys as sent, values decoded. */
  params: [string, string][];
  secret: string;
  body: Buffer;
}

/** The string to sign as Pusher's scheme defines it, written independently of src/. */
function stringToSign(method: string, path: string, params: [string, string][]): string {
  const lower = params.map(([k, v]) => [k.toLowerCase(), v] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${method.toUpperCase()}\n${path}\n${lower.map(([k, v]) => `${k}=${v}`).join('&')}`;
}
const sign = (i: Intent): string => createHmac('sha256', i.secret).update(stringToSign(i.method, i.signedPath, i.params)).digest('hex');
const md5 = (b: Buffer | string): string => createHash('md5').update(b).digest('hex');

const EXTRA_KEYS = ['info', 'filter_by_prefix', 'socket_id', 'a', 'zz', 'b_2', 'Info', 'X-Y', 'aaa', 'z'];
const SAFE_VALUES = ['user_count', 'subscription_count,user_count', 'presence-', '1.2', '', 'x', '123', 'a.b-c_d~e'];
const ODD_CHARS = ['&', '=', '%', '+', ' ', 'é', '#', '/', '?', '%41', '%zz', 'A', '0', ',', ';', '\u{1F511}'];

function oddString(rng: Rng): string {
  let s = '';
  for (let n = rng.range(0, 6); n > 0; n--) s += rng.bool(0.5) ? rng.pick(ODD_CHARS) : rng.pick(['a', 'b', 'z', '1', '-']);
  return s;
}

/**
 * A valid request as an SDK would sign it (before any layout or mutation). `plain`: only
 * lowercase keys and values with nothing to encode, as the bench and most apps send.
 */
function intent(rng: Rng, plain: boolean): Intent {
  const app = rng.pick(APPS);
  const method = rng.pick(['POST', 'POST', 'GET']);
  const path = rng.pick(['/apps/3/events', '/apps/3/batch_events', '/apps/3/channels', '/apps/3/channels/presence-a']);
  const body = method === 'GET' || rng.bool(0.1) ? Buffer.alloc(0)
    : Buffer.from(rng.bool(0.9) ? JSON.stringify({ name: 'e', channels: ['c' + rng.int(100)], data: 'x'.repeat(rng.int(300)) }) : String.fromCharCode(...Array.from({ length: rng.range(1, 80) }, () => rng.int(256))), rng.bool(0.9) ? 'utf8' : 'latin1');
  const params: [string, string][] = [['auth_key', app.key], ['auth_timestamp', String(NOW + rng.range(-TIMESTAMP_TOLERANCE_S, TIMESTAMP_TOLERANCE_S))], ['auth_version', '1.0']];
  if (body.length > 0) params.push(['body_md5', md5(body)]);
  const seen = new Set<string>();
  for (let n = rng.weighted([[5, 0], [3, 1], [2, 2], [1, 4]] as const); n > 0; n--) {
    const k = plain ? rng.pick(EXTRA_KEYS).toLowerCase() : rng.bool(0.9) ? rng.pick(EXTRA_KEYS) : 'k' + oddString(rng).replace(/[&=]/g, '');
    if (seen.has(k.toLowerCase()) || k === 'k') continue;
    seen.add(k.toLowerCase());
    params.push([k, plain || rng.bool(0.7) ? rng.pick(SAFE_VALUES) : oddString(rng)]);
  }
  return { method, path, signedPath: path, params, secret: app.secret, body };
}

type Encoding = 'raw' | 'uri' | 'form' | 'every';
function encode(s: string, how: Encoding): string {
  if (how === 'raw') return s;
  if (how === 'uri') return encodeURIComponent(s);
  if (how === 'form') return new URLSearchParams([['x', s]]).toString().slice(2);
  return [...Buffer.from(s, 'utf8')].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
}

/** The `pusher` SDK's layout: sorted by key, nothing encoded, the signature last. */
function sdkQuery(pairs: [string, string][], sig: string): string {
  const sorted = [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return [...sorted, ['auth_signature', sig]].map(([k, v]) => `${k}=${v}`).join('&');
}

/**
 * The parameters and signature laid out as a query: order, key case, encoding. `faithful`:
 * the query decodes to exactly these pairs (a value with '%', '+', '&' or '=' sent raw
 * does not: then the request is not the one signed). `plain`: the SDK's own layout.
 */
function layout(rng: Rng, pairs: [string, string][], sig: string, sdk: boolean): { query: string; faithful: boolean; plain: boolean } {
  const sorted = [...pairs].sort(([a], [b]) => (a.toLowerCase() < b.toLowerCase() ? -1 : 1));
  const order = sdk ? 'sdk' : rng.weighted([[3, 'sdk'], [2, 'shuffled'], [1, 'sig-first'], [1, 'sig-middle']] as const);
  let list: [string, string][] = sorted;
  if (order === 'shuffled') {
    list = [...sorted, ['auth_signature', sig]];
    for (let i = list.length - 1; i > 0; i--) { const j = rng.int(i + 1); [list[i], list[j]] = [list[j], list[i]]; }
  } else if (order === 'sig-first') list = [['auth_signature', sig], ...sorted];
  else if (order === 'sig-middle') list = [...sorted.slice(0, 1), ['auth_signature', sig], ...sorted.slice(1)];
  else list = [...sorted, ['auth_signature', sig]];
  const how = sdk ? 'raw' : rng.weighted([[3, 'raw'], [2, 'uri'], [1, 'form'], [1, 'every']] as const);
  const upperKeys = !sdk && rng.bool(0.2);
  const sent = list.map(([k, v]) => [upperKeys && rng.bool(0.5) ? k.toUpperCase() : k, v] as const);
  const query = sent.map(([k, v]) => `${encode(k, how === 'every' && rng.bool(0.5) ? 'raw' : how)}=${encode(v, how)}`).join('&');
  const faithful = JSON.stringify([...new URLSearchParams(query)]) === JSON.stringify(sent);
  const plain = order === 'sdk' && how === 'raw' && !upperKeys && !/[^\x20-\x7e]|[%+&=#]/.test(pairs.map(([k, v]) => k + v).join(''))
    && pairs.every(([k]) => k === k.toLowerCase());
  return { query, faithful, plain };
}

/** Random edits of a query string's characters. */
function scramble(rng: Rng, q: string): string {
  const alphabet = ['&', '=', '%', '+', 'A', 'a', 'f', 'g', '0', '9', '.', '_', 'é', '&&', '=='];
  for (let n = rng.range(1, 3); n > 0; n--) {
    const at = rng.int(q.length + 1);
    const op = rng.int(3);
    if (op === 0) q = q.slice(0, at) + rng.pick(alphabet) + q.slice(at + 1);
    else if (op === 1) q = q.slice(0, at) + q.slice(at + 1);
    else q = q.slice(0, at) + rng.pick(alphabet) + q.slice(at);
  }
  return q;
}

/** Mutations applied before signing (a client that signs what it sends, oddly) or after (tampering). */
function mutate(rng: Rng, i: Intent, r: SignedRequest): string {
  const kind = rng.pick([
    'drop', 'duplicate', 'duplicate-case', 'unsigned-extra', 'empty-pairs', 'scramble', 'sig-case', 'sig-bad-hex',
    'sig-short', 'sig-long', 'sig-wide', 'ts-skew', 'ts-odd', 'version', 'body-changed', 'body-emptied', 'md5-upper',
    'md5-other', 'md5-dropped', 'md5-for-empty', 'method-case', 'method-other', 'path-other', 'path-encoded', 'secret',
    'key-unknown', 'now',
  ] as const);
  const set = (k: string, v: string) => { i.params = i.params.map(([pk, pv]) => [pk, pk === k ? v : pv]); };
  switch (kind) {
    case 'drop': i.params.splice(rng.int(i.params.length), 1); break;
    case 'duplicate': { const p = rng.pick(i.params); i.params.push([p[0], rng.bool(0.5) ? p[1] : p[1] + '1']); break; }
    case 'duplicate-case': { const p = rng.pick(i.params); i.params.push([p[0].toUpperCase(), p[1]]); break; }
    case 'ts-skew': set('auth_timestamp', String(NOW + rng.pick([-1, 1]) * (TIMESTAMP_TOLERANCE_S + rng.pick([0, 1, 2, 1000])))); break;
    case 'ts-odd': set('auth_timestamp', rng.pick(['', 'soon', '-5', '+' + NOW, '0' + NOW, '00000' + NOW, '1'.repeat(16), `${NOW}.0`, ` ${NOW}`, '１'])); break;
    case 'version': set('auth_version', rng.pick(['1.1', '1.00', '', ' 1.0', '1', '1.0\u0000'])); break;
    case 'md5-upper': set('body_md5', md5(i.body).toUpperCase()); break;
    case 'md5-other': set('body_md5', md5(i.body.toString('latin1') + 'x')); break;
    case 'md5-dropped': i.params = i.params.filter(([k]) => k !== 'body_md5'); break;
    case 'md5-for-empty': if (i.body.length === 0) i.params.push(['body_md5', md5('')]); break;
    case 'method-case': r.method = i.method = rng.pick(['post', 'Post', 'get', 'GET', 'pOsT']); break;
    case 'path-encoded': r.path = i.signedPath = i.path + '%23x'; if (rng.bool(0.5)) i.signedPath = i.path + '#x'; break;
    case 'key-unknown': set('auth_key', rng.pick(['unknown', '', 'APP-KEY', 'app-key '])); break;
    case 'secret': i.secret = rng.pick(['wrong', '', APPS[0].secret + 'x']); break;
    default: break; // after signing, below
  }
  return kind;
}

function tamper(rng: Rng, kind: string, r: SignedRequest, sig: { value: string }): void {
  switch (kind) {
    case 'unsigned-extra': r.query += rng.pick(['&info=user_count', '&x=1', '&zzz', '&a=b', '&AUTH_KEY=app-key']); break;
    case 'empty-pairs': r.query = rng.pick([(q: string) => q.replace('&', '&&'), (q: string) => '&' + q, (q: string) => q + '&', (q: string) => q.replace('&', '&x&')])(r.query); break;
    case 'scramble': r.query = scramble(rng, r.query); break;
    case 'sig-case': r.query = r.query.replace(sig.value, sig.value.toUpperCase()); break;
    case 'sig-bad-hex': { const at = rng.int(64); r.query = r.query.replace(sig.value, sig.value.slice(0, at) + rng.pick(['g', 'G', 'z', ' ', '-', 'é']) + sig.value.slice(at + 1)); break; }
    case 'sig-short': r.query = r.query.replace(sig.value, sig.value.slice(0, rng.range(0, 63))); break;
    case 'sig-long': r.query = r.query.replace(sig.value, sig.value + rng.pick(['0', 'ab', sig.value])); break;
    case 'sig-wide': r.query = r.query.replace(sig.value, sig.value.slice(0, 63) + String.fromCharCode(0x100 + sig.value.charCodeAt(63))); break;
    case 'body-changed': { const b = Buffer.from(r.body); if (b.length > 0) b[rng.int(b.length)] ^= 1 + rng.int(255); r.body = rng.bool(0.3) ? Buffer.concat([r.body, Buffer.from(' ')]) : b; break; }
    case 'body-emptied': r.body = Buffer.alloc(0); break;
    case 'method-other': r.method = r.method.toUpperCase() === 'POST' ? 'GET' : 'POST'; break;
    case 'path-other': r.path = rng.pick(['/apps/4/events', '/apps/3/events/', '/apps/3/Events', r.path + 'x']); break;
    case 'now': r.nowSeconds += rng.pick([-1, 1]) * (TIMESTAMP_TOLERANCE_S + rng.range(-2, 2)); break;
    default: break;
  }
}

const sameParams = (a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean =>
  JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

t.test(`shortcut vs general check: ${CASES} requests (seed 0x${SEED.toString(16)})`, async (t) => {
  const rng = new Rng(SEED);
  const report = new FuzzReport();
  const outcomes = new Map<string, number>();
  const kinds = new Map<string, number>();
  /** Mutations after which the shortcut still accepted (a change that keeps the request valid). */
  const taken = new Map<string, number>();
  let plain = 0;
  let plainTaken = 0;
  for (let c = 0; c < CASES; c++) {
    // Half the requests in the SDK's layout with plain values (the shortcut's domain), half
    // in any layout; three in four then mutated.
    const sdk = rng.bool(0.5);
    const i = intent(rng, sdk);
    const r: SignedRequest = { method: i.method, path: i.path, query: '', authorization: null, body: i.body, nowSeconds: NOW };
    const sig = { value: '' };
    const mutated = rng.bool(0.75);
    const kind = mutated ? mutate(rng, i, r) : 'none';
    sig.value = sign(i);
    const laid = layout(rng, i.params, sig.value, sdk);
    r.query = laid.query;
    if (mutated) tamper(rng, kind, r, sig);
    report.count(kinds, kind);

    const fast = verifySdkLayout(r.method, r.path, r.query, r.body, r.nowSeconds, TIMESTAMP_TOLERANCE_S, lookup);
    const general = verifyAnyLayout(r, lookup);
    const both = verifyApiRequest(r, lookup);
    const what = `case ${c} (${kind}): ${JSON.stringify({ ...r, body: r.body.toString('latin1') })}`;
    if (fast !== null) report.count(taken, kind);
    report.count(outcomes, `${fast === null ? 'shortcut declined' : 'shortcut accepted'}, general ${general.ok ? 'accepted' : `refused ${general.status}`}`);
    if (fast !== null && !general.ok) report.problem(`shortcut accepted what the general check refuses (${general.error}): ${what}`);
    if (fast !== null && general.ok && (fast.authKey !== general.authKey || !sameParams(fast.params, general.params))) {
      report.problem(`shortcut and general check accept with different results: ${JSON.stringify([fast.authKey, [...fast.params]])} vs ${JSON.stringify([general.ok && general.authKey, general.ok && [...general.params]])}: ${what}`);
    }
    if (both.ok !== general.ok || (!both.ok && !general.ok && both.error !== general.error) || (both.ok && general.ok && !sameParams(both.params, general.params))) {
      report.problem(`verifyApiRequest and verifyAnyLayout differ: ${what}`);
    }
    if (kind === 'none' && laid.faithful && !general.ok) report.problem(`a valid request refused (${general.error}): ${what}`);
    if (kind === 'none' && laid.plain) {
      plain++;
      if (fast !== null) plainTaken++;
      else report.problem(`a plain SDK request not taken by the shortcut: ${what}`);
    }
  }
  t.comment(`outcomes: ${report.summary(outcomes, true)}`);
  t.comment(`mutations: ${report.summary(kinds, true)}`);
  t.comment(`accepted by the shortcut, by mutation: ${report.summary(taken, true)}`);
  t.comment(`plain SDK requests taken by the shortcut: ${plainTaken} of ${plain}`);
  t.same(report.problems.slice(0, 20), [], `${report.problems.length} problems in ${CASES} requests`);
  const accepted = outcomes.get('shortcut accepted, general accepted') ?? 0;
  t.ok(accepted > CASES / 10, `the shortcut accepted ${accepted} of ${CASES} requests (it must see real work)`);
  t.ok(plain > CASES / 10, `${plain} plain SDK requests generated`);
});

t.test('the reference signer signs as the pusher SDK does', async (t) => {
  const rng = new Rng(SEED ^ 0x9e3779b9);
  const realNow = Date.now;
  t.teardown(() => { Date.now = realNow; });
  let checked = 0;
  const mismatches: string[] = [];
  for (let c = 0; c < 300; c++) {
    const i = intent(rng, rng.bool(0.5));
    const app = APPS.find((a) => a.secret === i.secret)!;
    const extra = i.params.filter(([k]) => !/^(auth_|body_md5$)/.test(k) && !/[&=%+#\s]|[^\x20-\x7e]/.test(k + i.params.find(([pk]) => pk === k)![1]));
    if (extra.some(([k]) => k !== k.toLowerCase())) continue; // the SDK sorts keys as given; the server lowercases first
    const ts = Number(i.params.find(([k]) => k === 'auth_timestamp')![1]);
    Date.now = () => ts * 1000 + 500;
    const sdk = new Pusher({ appId: '3', key: app.key, secret: app.secret, host: '127.0.0.1' });
    const body = i.body.toString('latin1');
    if (body.length > 0 && !Buffer.from(body, 'utf8').equals(i.body)) continue; // the SDK hashes a string body as UTF-8
    const got = sdk.createSignedQueryString({ method: i.method, path: i.path, params: Object.fromEntries(extra), body: body.length > 0 ? body : undefined });
    const mine = i.params.filter(([k]) => /^(auth_|body_md5$)/.test(k) || extra.some(([e]) => e === k));
    const want = sdkQuery(mine, sign({ ...i, params: mine }));
    if (got !== want) mismatches.push(`case ${c}: SDK ${got}, reference ${want}`);
    checked++;
  }
  t.same(mismatches.slice(0, 5), [], `${mismatches.length} of ${checked} differ`);
  t.ok(checked > 100, `${checked} requests compared with the SDK`);
});
