// test-modes: once (one socket's lifecycle on its shard, the same code on every shard; delivery across shards: cross-shard, bridge, interest-race)
// WebSocket connection lifecycle against the protocol "Connection" and "Error codes":
// connection_established, ping/pong, the proto: spellings, activity pings (4201),
// refusals at connect (4001, 4003, 4004, 4009 origins), malformed frames (4000),
// oversized frames (1009) and unknown protocol events.

import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { APP, RawClient, eventually, startServer, type Frame, type TestServer } from '../helpers/server';

/** Opens a raw connection and returns it with its first frame (which RawClient.connect would consume). */
async function open(url: string, opts: WebSocket.ClientOptions = {}): Promise<{ c: RawClient; first: Frame }> {
  const ws = new WebSocket(url, opts);
  ws.on('error', () => { /* a refused or cut connection reports through 'close' */ });
  const c = new RawClient(ws);
  const first = await c.next(() => true, 5000);
  if (first.event.endsWith(':connection_established')) c.socketId = JSON.parse(first.data).socket_id;
  return { c, first };
}

/** Asserts the connection is refused with pusher:error `code` followed by close `code`. */
async function expectRefused(t: Test, srv: TestServer, key: string, code: number, opts: WebSocket.ClientOptions = {}, message?: string) {
  const { c, first } = await open(srv.wsUrl(key), opts);
  t.equal(first.event, 'pusher:error', `first frame is pusher:error (${code})`);
  t.equal(first.data?.code, code, `error code ${code}`);
  t.type(first.data?.message, 'string', 'error has a message');
  if (message !== undefined) t.equal(first.data?.message, message, 'error message');
  t.equal(await c.closed(), code, `closed with ${code}`);
}

async function expectAccepted(t: Test, srv: TestServer, key: string, opts: WebSocket.ClientOptions = {}, what = 'accepted') {
  const { c, first } = await open(srv.wsUrl(key), opts);
  t.equal(first.event, 'pusher:connection_established', what);
  await c.close();
}

/** Clients of one subtest, closed when it ends (the shared server outlives the subtest). */
function scope(t: Test): <C extends RawClient>(c: C) => C {
  const list: RawClient[] = [];
  t.teardown(async () => {
    await Promise.all(list.map((c) => c.close().catch(() => 0)));
  });
  return (c) => {
    list.push(c);
    return c;
  };
}

// Starting a server costs seconds with several shards under tap's loaders, so the tests
// that need no special global setting share one server; each uses its own app key.
const ORIGIN_CASES: { pattern: string[]; allow: (string | null)[]; deny: (string | null)[] }[] = [
  { pattern: ['example.com'], allow: ['http://example.com', 'https://example.com'], deny: ['http://evil.com', 'http://sub.example.com', 'https://example.com.evil.com', 'http://notexample.com'] },
  { pattern: ['example.com:8080'], allow: ['http://example.com:8080', 'https://example.com:8080'], deny: ['http://example.com:9090', 'http://example.com', 'http://other.com:8080'] },
  { pattern: ['https://secure.example'], allow: ['https://secure.example'], deny: ['http://secure.example', 'https://other.example'] },
  { pattern: ['http://plain.example'], allow: ['http://plain.example'], deny: ['https://plain.example', 'http://other.example'] },
  { pattern: ['*.wild.example'], allow: ['http://a.wild.example', 'https://a.wild.example', 'https://x.y.wild.example'], deny: ['http://notwild.example', 'http://wild.example.evil.com', 'http://evil.com'] },
  { pattern: ['https://*.swild.example'], allow: ['https://a.swild.example', 'https://x.y.swild.example'], deny: ['http://a.swild.example', 'https://a.other.example', 'https://notswild.example'] },
  { pattern: ['*'], allow: ['http://anything.example', 'https://x.y.z:1234', null], deny: [] },
  { pattern: ['https://one.example', 'two.example'], allow: ['https://one.example', 'http://two.example'], deny: ['http://one.example', 'http://three.example'] },
];
const ORIGIN_APPS = ORIGIN_CASES.map((c, i) => ({ id: `o${i}`, key: `origin-key-${i}`, secret: `s${i}`, allowed_origins: c.pattern }));
const LIMITED = { id: 'limited', key: 'limited-key', secret: 'limited-secret', max_connections: 2 };
const DISABLED = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };

let sharedSrv: Promise<TestServer> | null = null;
function shared(): Promise<TestServer> {
  sharedSrv ??= startServer({ apps: [{ ...APP }, DISABLED, LIMITED, ...ORIGIN_APPS] });
  return sharedSrv;
}
t.teardown(async () => {
  if (sharedSrv) await (await sharedSrv).stop();
});

/** Sends a frame and waits for the pong: the connection is open and answering. */
async function alive(c: RawClient): Promise<boolean> {
  c.send({ event: 'pusher:ping', data: {} });
  const pong = await c.event('pusher:pong');
  return pong.event === 'pusher:pong' && c.closeCode === null;
}

t.test('connection_established: data is a JSON string with socket_id and activity_timeout', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const ids = new Set<string>();
  for (let i = 0; i < 6; i++) {
    const { c, first } = await open(srv.wsUrl());
    keep(c);
    t.equal(first.event, 'pusher:connection_established');
    t.type(first.data, 'string', 'data is a JSON string, not an object');
    const data = JSON.parse(first.data);
    t.match(data.socket_id, /^\d+\.\d+$/, 'socket_id is <digits>.<digits>');
    t.equal(data.activity_timeout, 120, 'activity_timeout is the configured value (default 120)');
    t.notOk(ids.has(data.socket_id), 'socket_id is unique');
    ids.add(data.socket_id);
    t.equal(first.channel, undefined, 'no channel on connection_established');
  }
  // Query parameters are optional, an unknown protocol version is accepted.
  for (const q of ['', '?protocol=99', '?client=node&version=0.0.1']) {
    const { c, first } = await open(srv.wsUrl(APP.key, q));
    t.equal(first.event, 'pusher:connection_established', `query "${q}" accepted`);
    await c.close();
  }
});

t.test('pusher:ping and proto:ping are answered with pusher:pong and data {}', async (t) => {
  const srv = await shared();
  const c = scope(t)(await RawClient.connect(srv.wsUrl()));
  const pings: unknown[] = [
    { event: 'pusher:ping', data: {} },
    { event: 'pusher:ping' },
    { event: 'pusher:ping', data: '{}' },
    { event: 'pusher:ping', data: 'anything' },
    { event: 'proto:ping', data: {} },
    { event: 'proto:ping' },
  ];
  for (const p of pings) {
    c.send(p);
    const pong = await c.event('pusher:pong');
    t.same(pong, { event: 'pusher:pong', data: {} }, `pong for ${JSON.stringify(p)}`);
  }
  await c.sync(); // a round trip after the pings: an extra pong would be here before it
  t.same(c.frames, [], 'exactly one pong per ping, nothing else');
});

t.test('protocol.event_prefix proto: the server sends proto: / proto_internal: names', async (t) => {
  const srv = await startServer({ protocol: { event_prefix: 'proto' } });
  t.teardown(() => srv.stop());
  const { c, first } = await open(srv.wsUrl());
  srv.track(c);
  const seen: string[] = [first.event];
  c.ws.on('message', (raw) => seen.push(JSON.parse(raw.toString()).event));
  t.equal(first.event, 'proto:connection_established');
  t.match(JSON.parse(first.data).socket_id, /^\d+\.\d+$/);

  c.send({ event: 'pusher:ping', data: {} });
  t.same(await c.event('proto:pong'), { event: 'proto:pong', data: {} }, 'pusher:ping → proto:pong');
  c.send({ event: 'proto:ping', data: {} });
  t.same(await c.event('proto:pong'), { event: 'proto:pong', data: {} }, 'proto:ping → proto:pong');

  c.send({ event: 'pusher:subscribe', data: { channel: 'pub-a' } });
  const a = await c.event('proto_internal:subscription_succeeded', 'pub-a');
  t.equal(a.data, '{}');
  c.send({ event: 'proto:subscribe', data: { channel: 'pub-b' } });
  const b = await c.event('proto_internal:subscription_succeeded', 'pub-b');
  t.equal(b.data, '{}');

  c.send({ event: 'pusher:subscribe', data: { channel: 'private-x', auth: `${APP.key}:00` } });
  const err = await c.event('proto:subscription_error', 'private-x');
  t.equal(err.data.type, 'AuthError');

  c.send('not json');
  const malformed = await c.event('proto:error');
  t.equal(malformed.data.code, 4000);

  // Presence member events (sent by the channel's owner shard) use the prefix too.
  const other = srv.track((await open(srv.wsUrl())).c);
  for (const [client, user_id] of [[c, 'u1'], [other, 'u2']] as const) {
    const a = srv.sdk().authorizeChannel(client.socketId, 'presence-p', { user_id });
    client.send({ event: 'pusher:subscribe', data: { channel: 'presence-p', auth: a.auth, channel_data: a.channel_data } });
    await client.event('proto_internal:subscription_succeeded', 'presence-p');
  }
  t.equal(JSON.parse((await c.event('proto_internal:member_added', 'presence-p')).data).user_id, 'u2');
  await other.close();
  t.equal(JSON.parse((await c.event('proto_internal:member_removed', 'presence-p')).data).user_id, 'u2');

  t.same(seen.filter((e) => e.startsWith('pusher')), [], `nothing was sent with the pusher prefix (${seen.join(', ')})`);

  // A refusal at connect uses the prefix as well.
  const bad = await open(srv.wsUrl('no-such-key'));
  t.equal(bad.first.event, 'proto:error');
  t.equal(bad.first.data.code, 4001);
  t.equal(await bad.c.closed(), 4001);
});

t.test('activity timeout: server pings a quiet client and closes it with 4201 when it does not answer', async (t) => {
  const srv = await startServer({ websocket: { activity_timeout: 1, pong_timeout: 1 } });
  t.teardown(() => srv.stop());
  const url = srv.wsUrl();
  // The server counts silence from the upgrade, which is after this instant.
  const connectedAt = Date.now();
  const [silentOpen, answererOpen, chattyOpen] = await Promise.all([open(url), open(url), open(url)]);
  const silent = srv.track(silentOpen.c);
  const answerer = srv.track(answererOpen.c);
  const chatty = srv.track(chattyOpen.c);
  t.equal(JSON.parse(silentOpen.first.data).activity_timeout, 1, 'activity_timeout announced in connection_established');

  let answered = 0;
  answerer.ws.on('message', (raw) => {
    if (JSON.parse(raw.toString()).event === 'pusher:ping') {
      answered++;
      answerer.send({ event: 'pusher:pong', data: {} });
    }
  });
  // Any client frame counts as activity: a client that keeps talking is never pinged.
  const chatter = setInterval(() => chatty.send({ event: 'pusher:ping', data: {} }), 200);
  t.teardown(() => clearInterval(chatter));

  const ping = await silent.event('pusher:ping', undefined, 5000);
  const pingedAfter = Date.now() - connectedAt;
  t.ok(pingedAfter >= 990, `server ping comes after ~activity_timeout of silence (${pingedAfter} ms)`);
  t.same(ping.data ?? {}, {}, 'ping data is {}');
  t.equal(await silent.closed(6000), 4201, 'silent client closed with 4201');
  t.ok(Date.now() - connectedAt >= 1800, 'closed only after activity_timeout + pong_timeout');

  await eventually(() => answered >= 2, 8000, 'two server pings answered');
  t.equal(answerer.closeCode, null, 'a client that answers the pings stays open');
  t.ok(await alive(answerer), 'answering client still works');

  clearInterval(chatter);
  await chatty.sync(); // a close or a server ping sent before this round trip would be here now
  t.equal(chatty.closeCode, null, 'a client that keeps sending stays open');
  t.same(chatty.frames.filter((f) => f.event === 'pusher:ping'), [], 'a client that keeps sending is never pinged');
});

t.test('unknown app key → pusher:error 4001, close 4001', async (t) => {
  const srv = await shared();
  await expectRefused(t, srv, 'no-such-key', 4001);
  await expectRefused(t, srv, 'app-key-but-longer', 4001);
});

t.test('disabled app → pusher:error 4003, close 4003', async (t) => {
  const srv = await shared();
  await expectRefused(t, srv, DISABLED.key, 4003);
  await expectAccepted(t, srv, APP.key, {}, 'the enabled app next to it still accepts connections');
});

t.test('max_connections is counted across shards: 4004 when full, accepted again after a close', async (t) => {
  const srv = await shared();
  const keep = scope(t);
  const url = srv.wsUrl(LIMITED.key);
  const c1 = keep((await open(url)).c);
  t.ok(c1.socketId, 'first connection accepted');
  const c2 = keep((await open(url)).c);
  t.ok(c2.socketId, 'second connection accepted');
  // Several attempts: with several shards they land on different shards (SO_REUSEPORT).
  for (let i = 0; i < 4; i++) await expectRefused(t, srv, LIMITED.key, 4004);
  await expectAccepted(t, srv, APP.key, {}, 'another app is not affected by this app\'s limit');
  t.ok(await alive(c1) && await alive(c2), 'the accepted connections are unaffected');

  await c1.close();
  let c3: RawClient | null = null;
  await eventually(async () => {
    const { c, first } = await open(url);
    if (first.event === 'pusher:connection_established') {
      c3 = keep(c);
      return true;
    }
    await c.closed();
    return false;
  }, 3000, 'a connection to be accepted after one closed');
  t.ok(c3, 'a new connection is accepted once one closed');
  await expectRefused(t, srv, LIMITED.key, 4004);
});

t.test('origin checks for every allowed_origins pattern form', async (t) => {
  const srv = await shared();
  const cases = ORIGIN_CASES;
  const apps = ORIGIN_APPS;
  for (const [i, c] of cases.entries()) {
    await t.test(`allowed_origins ${JSON.stringify(c.pattern)}`, async (t) => {
      for (const origin of c.allow) {
        await expectAccepted(t, srv, apps[i].key, origin === null ? {} : { origin }, `origin ${origin} accepted`);
      }
      for (const origin of c.deny) {
        await expectRefused(t, srv, apps[i].key, 4009, origin === null ? {} : { origin }, 'Origin not allowed');
      }
    });
  }
  await expectAccepted(t, srv, APP.key, { origin: 'http://whatever.example' }, 'an app without allowed_origins accepts any origin');
  // The header may also come through `headers`.
  await expectRefused(t, srv, apps[0].key, 4009, { headers: { Origin: 'http://evil.com' } }, 'Origin not allowed');
  await expectAccepted(t, srv, apps[0].key, { headers: { Origin: 'https://example.com' } }, 'Origin header via headers accepted');
});

t.test('malformed frames → pusher:error 4000 and the connection keeps working', async (t) => {
  const srv = await shared();
  const c = scope(t)(await RawClient.connect(srv.wsUrl()));
  const bad = ['not json', '{"event":', '[1,2,3]', '["pusher:ping",{}]', '{"data":{}}', '{"channel":"x","data":"{}"}', '{"event":42,"data":{}}', 'null', '"pusher:ping"', '42'];
  for (const raw of bad) {
    c.send(raw);
    const err = await c.event('pusher:error');
    t.equal(err.data?.code, 4000, `4000 for ${raw}`);
    t.type(err.data?.message, 'string');
  }
  t.equal(c.closeCode, null, 'still open');
  const sub = await c.subscribe('after-malformed');
  t.equal(sub.event, 'pusher_internal:subscription_succeeded', 'subscribe succeeds afterwards');
  t.ok(await alive(c));
});

t.test('unknown pusher: events are ignored: no error, the connection stays', async (t) => {
  const srv = await shared();
  const c = scope(t)(await RawClient.connect(srv.wsUrl()));
  c.send({ event: 'pusher:no_such_event', data: {} });
  c.send({ event: 'pusher:no_such_event' });
  c.send({ event: 'proto:no_such_event', data: { x: 1 } });
  c.send({ event: 'pusher:pong', data: {} });
  c.send({ event: 'pusher:', data: {} });
  await c.sync(); // the server read every frame before the sentinel subscribe
  t.same(c.frames, [], 'no answer at all');
  t.equal(c.closeCode, null, 'still open');
  const sub = await c.subscribe('after-unknown');
  t.equal(sub.event, 'pusher_internal:subscription_succeeded');
  t.ok(await alive(c));
});

// One server for the payload limit, stopped at the end to check the shutdown close code.
t.test('server with websocket.max_payload_kb 1', async (t) => {
  const srv = await startServer({ websocket: { max_payload_kb: 1 } });
  t.teardown(() => srv.stop());

  await t.test('a frame over WEBSOCKET_MAX_PAYLOAD_KB closes the connection with 1009', async (t) => {
    /** A pusher:ping frame of exactly n bytes. */
    const frameOf = (n: number) => {
      const empty = JSON.stringify({ event: 'pusher:ping', data: { pad: '' } });
      return JSON.stringify({ event: 'pusher:ping', data: { pad: 'x'.repeat(n - empty.length) } });
    };
    const keep = scope(t);
    const c = keep(await RawClient.connect(srv.wsUrl()));
    c.send(frameOf(1024));
    await c.event('pusher:pong');
    t.pass('a frame of exactly the limit is handled');
    for (const size of [1025, 2048]) {
      const over = keep(await RawClient.connect(srv.wsUrl()));
      over.send(frameOf(size));
      t.equal(await over.closed(), 1009, `a ${size}-byte frame closes the connection with 1009`);
    }
    // Far over the limit uWS cuts the connection before reading the frame (no close frame).
    const huge = keep(await RawClient.connect(srv.wsUrl()));
    huge.send(frameOf(64 * 1024));
    t.ok(await huge.closed(), 'a frame far over the limit closes the connection');
    t.ok(await alive(c), 'other connections are unaffected');
  });

  await t.test('server shutdown closes open connections with 4200', async (t) => {
    const a = await RawClient.connect(srv.wsUrl());
    const b = await RawClient.connect(srv.wsUrl());
    t.equal((await a.subscribe('before-shutdown')).event, 'pusher_internal:subscription_succeeded');
    const stopped = srv.stop();
    t.equal(await a.closed(5000), 4200, 'subscribed client closed with 4200');
    t.equal(await b.closed(5000), 4200, 'idle client closed with 4200');
    await stopped;
  });
});

// The app's max_message_size_kb applies within the server-wide max_payload_kb: one app may
// allow less than the server does, and only its connections are held to it.
t.test('per-app max_message_size_kb', async (t) => {
  const SMALL = { id: 'small-id', key: 'small-key', secret: 'small-secret', max_message_size_kb: 1 };
  const srv = await startServer({ websocket: { max_payload_kb: 8 }, apps: [{ ...APP }, SMALL] });
  t.teardown(() => srv.stop());
  const frameOf = (n: number) => {
    const empty = JSON.stringify({ event: 'pusher:ping', data: { pad: '' } });
    return JSON.stringify({ event: 'pusher:ping', data: { pad: 'x'.repeat(n - empty.length) } });
  };
  const keep = scope(t);
  const small = keep(await RawClient.connect(srv.wsUrl(SMALL.key)));
  small.send(frameOf(1024));
  await small.event('pusher:pong');
  t.pass('a frame of exactly the app\'s limit is handled');
  const over = keep(await RawClient.connect(srv.wsUrl(SMALL.key)));
  over.send(frameOf(1025));
  t.equal(await over.closed(), 1009, 'one byte over the app\'s 1 KB closes with 1009');
  const other = keep(await RawClient.connect(srv.wsUrl()));
  other.send(frameOf(4096));
  await other.event('pusher:pong');
  t.pass('another app\'s connection may send 4 KB (server limit 8 KB, its own default)');
  t.ok(await alive(small), 'the small app\'s other connection is unaffected');
});
