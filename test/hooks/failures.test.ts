// test-modes: once (hook calls and their failures are handled by the shard holding the socket, the same code on every shard; across shards: hooks/hooks)
// Backend hooks when the backend misbehaves: slow, 500, invalid JSON, an answer over the size
// cap, no `allow`, no answer at all; each under on_failure deny and allow, the connection
// staying usable. The circuit breaker opens and closes; a closed connection cancels its
// pending call and leaves nothing behind; the per-connection queue and the in-flight bound
// hold; a thousand connections on a dead backend stay bounded; HTTPS endpoints with a
// private CA; a SIGHUP-style reload adds hooks to a running app.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config';
import { startHookBackend, type Answer, type HookBackend } from '../helpers/hook-backend';
import { signedGet } from '../helpers/http';
import { APP, RawClient, WORKERS, eventually, startServer, type Frame, type TestServer } from '../helpers/server';

const dataOf = (f: Frame) => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data);

async function setup(t: Test, hooks: (url: string) => Record<string, unknown>, extra: Record<string, unknown> = {},
  backendOpts: Parameters<typeof startHookBackend>[0] = {}): Promise<{ srv: TestServer; backend: HookBackend }> {
  const backend = await startHookBackend(backendOpts);
  const srv = await startServer({ apps: [{ ...APP, hooks: hooks(backend.url) }], metrics: { enabled: true, port: 0, host: '127.0.0.1' }, ...extra });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  return { srv, backend };
}

function scrape(srv: TestServer): Promise<string> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: srv.server.metricsPort!, path: '/metrics', agent: false }, (res) => {
      let s = '';
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve(s));
    }).on('error', reject);
  });
}

/** Sum of a metric's series whose labels contain every `want` pair. */
function metric(text: string, name: string, want: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`ringcast_${name}`)) continue;
    const m = /^(\S+?)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== `ringcast_${name}`) continue;
    if (Object.entries(want).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

const FAULTS: [string, Answer, RegExp][] = [
  ['slow (over timeout_ms)', { json: { allow: true }, delayMs: 1500 }, /subscribe hook failed \(no answer within 300 ms\)/],
  ['500', { status: 500, raw: 'oops' }, /subscribe hook failed \(status 500\)/],
  ['invalid JSON', { raw: '{"allow": tru' }, /subscribe hook failed \(the answer is not JSON\)/],
  ['an answer over max_response_kb', { raw: JSON.stringify({ allow: true, pad: 'x'.repeat(3000) }) }, /subscribe hook failed \(answer of more than the 1024 bytes allowed/],
  ['no allow', { json: { reason: 'forgot' } }, /subscribe hook failed \(the answer has no boolean "allow"\)/],
  ['no answer at all', 'hang', /subscribe hook failed \(no answer within 300 ms\)/],
];

t.test(`each fault: on_failure deny refuses, allow lets through; the connection stays usable (workers ${WORKERS})`, async (t) => {
  const { srv, backend } = await setup(t, (url) => ({
    url, timeout_ms: 300,
    subscribe: { enabled: true, channels: ['deny-*'] },
    client_event: { enabled: false },
  }), { hook_client: { max_response_kb: 1, breaker: { failures: 1000, open_ms: 1000 } } });
  // a second app on the same backend with on_failure allow
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  for (const [what, answer, re] of FAULTS) {
    backend.answer = () => answer;
    const f = await c.subscribe(`deny-${what.replace(/\W+/g, '-')}`);
    t.equal(f.event, 'pusher:subscription_error', `${what}: refused under deny`);
    t.match(dataOf(f), { type: 'AuthError', status: 403, error: re }, what);
    await c.sync(); // usable
  }
  const text = await scrape(srv);
  t.equal(metric(text, 'hook_calls_total', { hook: 'subscribe', result: 'failed' }), FAULTS.length, 'counted as failed');
  for (const r of ['timeout', 'status', 'invalid_answer', 'too_large']) t.ok(metric(text, 'hook_failures_total', { reason: r }) >= 1, `reason ${r}`);
  t.ok(metric(text, 'hook_duration_seconds_count', { hook: 'subscribe' }) >= FAULTS.length, 'latency histogram');
  await eventually(() => backend.open() === 0, 5000, 'the timed-out requests closed by the server');
});

t.test('on_failure allow: every fault lets the subscribe through', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, timeout_ms: 300, on_failure: 'allow', subscribe: { enabled: true } }),
    { hook_client: { max_response_kb: 1, breaker: { failures: 1000, open_ms: 1000 } } });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  for (const [what, answer] of FAULTS) {
    backend.answer = () => answer;
    t.equal((await c.subscribe(`allow-${what.replace(/\W+/g, '-')}`)).event, 'pusher_internal:subscription_succeeded', what);
  }
});

t.test('circuit breaker: opens after consecutive failures (no calls), half-open probe closes it', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true } }), { hook_client: { breaker: { failures: 3, open_ms: 800 } } });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  backend.answer = () => ({ status: 503 });
  for (let i = 0; i < 3; i++) t.match(dataOf(await c.subscribe(`b-${i}`)), { error: /status 503/ });
  const before = backend.calls.length;
  const skipped = await c.subscribe('b-skipped');
  t.match(dataOf(skipped), { status: 403, error: /subscribe hook not called \(circuit breaker open\)/ });
  t.equal(backend.calls.length, before, 'the open breaker does not call');
  t.equal(metric(await scrape(srv), 'hook_breakers_open'), 1, 'breaker state metric');
  backend.answer = () => ({ allow: true });
  await new Promise((r) => setTimeout(r, 900));
  t.equal((await c.subscribe('b-probe')).event, 'pusher_internal:subscription_succeeded', 'the probe goes through');
  t.equal((await c.subscribe('b-after')).event, 'pusher_internal:subscription_succeeded');
  t.equal(backend.calls.length, before + 2);
  const text = await scrape(srv);
  t.equal(metric(text, 'hook_breakers_open'), 0, 'closed again');
  t.equal(metric(text, 'hook_calls_total', { result: 'skipped' }), 1);
  t.equal(metric(text, 'hook_failures_total', { reason: 'breaker_open' }), 1);
});

t.test('a connection closed while its hook is pending cancels the call and leaves nothing behind', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true, channels: ['presence-*'] } }));
  backend.answer = () => 'hang';
  const c = await RawClient.connect(srv.wsUrl());
  c.subscribeAuthed('presence-gone', { user_id: 'ghost' }).catch(() => undefined);
  await backend.until((calls) => calls.length === 1, 5000, 'the subscribe call');
  await c.close();
  await backend.until((calls) => calls[0].aborted, 5000, 'the call aborted by the server');
  backend.answer = () => ({ allow: true });
  const other = srv.track(await RawClient.connect(srv.wsUrl()));
  await other.subscribeAuthed('presence-gone', { user_id: 'real' });
  const users = await signedGet(srv.port, APP, 'channels/presence-gone/users');
  t.same(users.json.users, [{ id: 'real' }], 'no member from the closed connection');
  await eventually(async () => metric(await scrape(srv), 'hook_calls_in_flight') === 0, 5000, 'nothing in flight');
  t.equal(metric(await scrape(srv), 'hook_failures_total', { reason: 'cancelled' }), 1);
});

t.test('frames behind a pending hook wait in order, bounded per connection: the rest refused with 4301', async (t) => {
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true, channels: ['slow'] } }),
    { hook_client: { max_pending_per_connection: 3 } });
  let release: () => void = () => undefined;
  backend.answer = () => new Promise<Answer>((r) => { release = () => r({ allow: true }); });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  c.send({ event: 'pusher:subscribe', data: { channel: 'slow' } });
  await backend.until((calls) => calls.length === 1, 5000, 'the subscribe call');
  for (let i = 0; i < 5; i++) c.send({ event: 'pusher:subscribe', data: { channel: `q-${i}` } });
  const errs = [await c.event('pusher:error'), await c.event('pusher:error')];
  for (const e of errs) t.match(e.data, { code: 4301, message: /Too many messages waiting for a backend hook \(at most 3 messages/ });
  release();
  t.equal((await c.event('pusher_internal:subscription_succeeded', 'slow')).channel, 'slow');
  for (let i = 0; i < 3; i++) t.ok(await c.event('pusher_internal:subscription_succeeded', `q-${i}`), `q-${i} after slow, in order`);
  await c.sync();
  t.notOk(c.frames.some((f) => f.channel === 'q-3' || f.channel === 'q-4'), 'the two over the bound were dropped');
});

t.test('a client event whose data the hook replaces with more than max_event_payload_in_kb is refused', async (t) => {
  const backend = await startHookBackend();
  backend.answer = () => ({ allow: true, data: 'x'.repeat(2000) });
  const srv = await startServer({ apps: [{ ...APP, max_event_payload_in_kb: 1, hooks: { url: backend.url, client_event: { enabled: true } } }] });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const a = srv.track(await RawClient.connect(srv.wsUrl()));
  await a.subscribeAuthed('private-x');
  a.send({ event: 'client-x', channel: 'private-x', data: { small: true } });
  t.match(await a.event('pusher:error'), { channel: 'private-x', data: { code: 4301, message: 'Client event payload is larger than 1 KB (as replaced by the client_event hook)' } });
});

t.test('a thousand connections on a dead backend: in flight bounded per shard, the rest by policy at once, the breaker opens', async (t) => {
  const maxInFlight = 50;
  const { srv, backend } = await setup(t, (url) => ({ url, timeout_ms: 1500, connect: { enabled: true } }),
    { hook_client: { max_in_flight: maxInFlight, breaker: { failures: 5, open_ms: 60_000 } } });
  backend.answer = () => 'hang';
  const N = 1000;
  const clients: RawClient[] = [];
  const refused: Promise<Frame>[] = [];
  for (let i = 0; i < N; i++) {
    const c = new RawClient(new WebSocket(srv.wsUrl()));
    clients.push(c);
    refused.push(c.next(() => true, 30_000));
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 20));
  }
  t.teardown(() => { for (const c of clients) c.ws.terminate(); });
  await backend.until((calls) => calls.length >= maxInFlight, 10_000, 'the first calls');
  const text = await scrape(srv);
  t.ok(metric(text, 'hook_calls_in_flight') <= maxInFlight * WORKERS, `at most ${maxInFlight} calls in flight per shard`);
  const firsts = await Promise.all(refused);
  t.ok(firsts.every((f) => f.event === 'pusher:error' && f.data.code === 4009), 'every connection refused (deny): by timeout, the bound or the breaker');
  t.ok(backend.calls.length <= maxInFlight * WORKERS + 5 * WORKERS, `the backend saw ${backend.calls.length} calls, not ${N}`);
  const after = await scrape(srv);
  t.ok(metric(after, 'hook_failures_total', { reason: 'overloaded' }) > 0, 'over the bound: counted');
  t.equal(metric(after, 'hook_breakers_open'), WORKERS, 'the breaker of every shard opened');
  const skipped = metric(after, 'hook_failures_total', { reason: 'breaker_open' });
  const late = new RawClient(new WebSocket(srv.wsUrl()));
  t.equal(await late.closed(1000), 4009, 'a later connection is refused at once');
  t.equal(metric(await scrape(srv), 'hook_failures_total', { reason: 'breaker_open' }), skipped + 1, 'without a call: skipped by the open breaker');
  await eventually(async () => metric(await scrape(srv), 'hook_calls_in_flight') === 0, 10_000, 'in flight back to 0');
});

function selfSigned(): { cert: string; key: string; certPath: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ringcast-hooks-tls-'));
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath };
}

t.test('HTTPS endpoint: trusted through hook_client.ca_path; an untrusted certificate is a failure', async (t) => {
  const tls = selfSigned();
  const { srv, backend } = await setup(t, (url) => ({ url, subscribe: { enabled: true } }), { hook_client: { ca_path: tls.certPath } }, { tls });
  t.match(backend.url, /^https:/);
  backend.answer = (c) => (c.body.channel === 'no' ? { allow: false, reason: 'over tls' } : { allow: true });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await c.subscribe('yes')).event, 'pusher_internal:subscription_succeeded');
  t.match(dataOf(await c.subscribe('no')), { error: 'over tls' });
  t.ok(backend.calls[0].valid);

  const untrusted = await startServer({ apps: [{ ...APP, hooks: { url: backend.url, subscribe: { enabled: true } } }] });
  t.teardown(() => untrusted.stop());
  const u = untrusted.track(await RawClient.connect(untrusted.wsUrl()));
  t.match(dataOf(await u.subscribe('yes')), { status: 403, error: /subscribe hook failed \(.*(CERT|SIGNED|certificate).*\)/i });
});

t.test('check-config errors name the key and the rule', async (t) => {
  const load = (hooks: unknown, extra: Record<string, unknown> = {}) => () => loadConfig({ env: {}, overrides: { apps: [{ ...APP, hooks: hooks as Record<string, unknown> }], ...extra } });
  t.throws(load({ subscribe: { enabled: true } }), { message: /apps\[0\]\.hooks\.subscribe\.url is required when the hook is enabled \(or set apps\[0\]\.hooks\.url/ });
  t.throws(load({ url: 'ftp://x' }), { message: /apps\[0\]\.hooks\.url must be an http:\/\/ or https:\/\/ URL, got "ftp:\/\/x"/ });
  t.throws(load({ url: 'http://x', on_failure: 'maybe' }), { message: /apps\[0\]\.hooks\.on_failure must be one of deny, allow, got "maybe"/ });
  t.throws(load({ url: 'http://x', timeout_ms: 0 }), { message: /apps\[0\]\.hooks\.timeout_ms must be an integer between 1 and 60000, got 0/ });
  t.throws(load({ url: 'http://x', subscribe: { enabled: true, channels: ['a*b'] } }), { message: /apps\[0\]\.hooks\.subscribe\.channels\[0\] is not a pattern/ });
  t.throws(load({ url: 'http://x', subscribe: { enabled: true, channels: [] } }), { message: /apps\[0\]\.hooks\.subscribe\.channels must be a non-empty list of patterns/ });
  t.throws(load({ url: 'http://x', connect: { enabled: true, channels: ['*'] } }), { message: /apps\[0\]\.hooks\.connect\.channels does not apply to the connect hook/ });
  t.throws(load({ url: 'http://x', subscribe: { enabled: true, events: ['*'] } }), { message: /apps\[0\]\.hooks\.subscribe\.events does not apply to the subscribe hook/ });
  t.throws(load({ url: 'http://x', subscibe: {} }), { message: /apps\[0\]\.hooks\.subscibe is not a known hooks setting \(did you mean "subscribe"\?\)/ });
  t.throws(load({ url: 'http://x', publish: { enabled: 'yes' } }), { message: /apps\[0\]\.hooks\.publish\.enabled must be a boolean/ });
  t.throws(load(null, { hook_client: { max_in_flight: 0 } }), { message: /hook_client\.max_in_flight must be an integer between 1 and 100000, got 0/ });
  t.throws(load(null, { hook_client: { ca_path: '/nonexistent/ca.pem' } }), { message: /hook_client\.ca_path must name a readable PEM file \(ENOENT\)/ });
  const ok = loadConfig({ env: {}, overrides: { apps: [{ ...APP, hooks: { url: 'https://b.example/h', on_failure: 'allow', subscribe: { enabled: true, timeout_ms: 200, on_failure: 'deny' }, client_event: { enabled: true } } }] } });
  t.same(ok.apps[0].hooks!.subscribe, { enabled: true, url: 'https://b.example/h', timeout_ms: 200, on_failure: 'deny', channels: ['*'], events: [] });
  t.same(ok.apps[0].hooks!.client_event, { enabled: true, url: 'https://b.example/h', timeout_ms: 1000, on_failure: 'allow', channels: ['*'], events: ['client-*'] });
  t.equal(ok.apps[0].hooks!.connect.enabled, false, 'a hook not written is off');
});

t.test('reload: hooks added to a running app apply to its open connections from the next call', async (t) => {
  const backend = await startHookBackend();
  const srv = await startServer({ apps: [{ ...APP }] });
  t.teardown(async () => {
    await srv.stop();
    await backend.close();
  });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  t.equal((await c.subscribe('before')).event, 'pusher_internal:subscription_succeeded');
  backend.answer = () => ({ allow: false, reason: 'hooked now' });
  const next = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, apps: [{ ...APP, hooks: { url: backend.url, subscribe: { enabled: true } } }] } });
  t.same((await srv.server.reload(next)).changed, [APP.id]);
  t.match(dataOf(await c.subscribe('after')), { error: 'hooked now', status: 403 });
  const removed = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, apps: [{ ...APP }] } });
  await srv.server.reload(removed);
  t.equal((await c.subscribe('again')).event, 'pusher_internal:subscription_succeeded', 'removed again: no call');
  t.equal(backend.calls.length, 1);
});
