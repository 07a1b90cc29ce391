// test-modes: both
// A hung nats-server (SIGSTOP: connections open, nothing read) does not make the adapter's
// NATS publisher buffer without bound: past NATS_MAX_PENDING_BYTES held for the server a
// publish is refused (false), and after SIGCONT every accepted one is delivered. Through a
// running server: API publishes answer 503 once the publisher's backlog is past half its
// cap (or, once the client's pings time out, because the backend is down), nothing
// delivered for those, and every publish answered 200 reached the subscriber.

import t from 'tap';
import { NATS_MAX_PENDING_BYTES, createNatsTransport } from '../../src/adapter/nats';
import { loadConfig } from '../../src/config';
import { signedPost } from '../helpers/http';
import { NatsServer } from '../helpers/nats';
import { APP, RawClient, eventually, startServer } from '../helpers/server';

t.test('transport: a frozen nats-server caps the bytes held; they drain after SIGCONT', async (t) => {
  const nats = await NatsServer.start(undefined, { jetstream: false });
  t.teardown(() => nats.stop());
  const cfg = loadConfig({ env: {}, overrides: { apps: [{ ...APP }], adapter: { driver: 'nats', nats: { servers: [nats.url] } } } }).adapter.nats;
  const pub = createNatsTransport(cfg) as ReturnType<typeof createNatsTransport> & { pending(): number };
  const sub = createNatsTransport(cfg);
  t.teardown(() => Promise.all([pub.close(), sub.close()]));
  await Promise.all([pub.connect(5000), sub.connect(5000)]);
  const got: string[] = [];
  await sub.subscribe('hung', (d) => got.push(Buffer.from(d).toString('latin1', 0, 12)));
  await eventually(() => {
    pub.publish('hung', Buffer.from('before'));
    return got.includes('before');
  }, 5000, 'the first message');

  nats.freeze();
  const payload = 'x'.repeat(16 * 1024);
  let accepted = 0;
  // in turns, so the client hands its buffer to the socket in between
  for (let turn = 0; turn < 200 && accepted === turn * 10; turn++) {
    for (let i = 0; i < 10; i++) if (pub.publish('hung', Buffer.from(`${String(turn * 10 + i).padStart(11, '0')}:${payload}`))) accepted++;
    await new Promise((r) => setImmediate(r));
  }
  t.ok(accepted < 2000, `${accepted} of up to 2,000 publishes of 16 KiB accepted while the server hangs`);
  t.ok(pub.pending() <= NATS_MAX_PENDING_BYTES + payload.length + 64, `${pub.pending()} bytes held (cap ${NATS_MAX_PENDING_BYTES})`);
  t.ok(pub.backlog!() >= 0.5, 'the backlog says so');

  nats.thaw();
  const during = () => got.filter((m) => /^\d{11}:/.test(m));
  await eventually(() => during().length >= accepted, 15_000, 'every accepted publish after SIGCONT');
  pub.publish('hung', Buffer.from('after'));
  await eventually(() => got.includes('after'), 5000, 'a publish after them');
  t.same(during().map(Number.parseFloat), Array.from({ length: accepted }, (_, i) => i), 'each accepted one once, in order');
});

t.test('server: API publishes during a hung nats-server answer 503 past half the cap, every one answered 200 delivered', async (t) => {
  const nats = await NatsServer.start(undefined, { jetstream: false });
  t.teardown(() => nats.stop());
  const srv = await startServer({ adapter: { driver: 'nats', nats: { servers: [nats.url] } } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('hung');

  nats.freeze();
  const data = 'y'.repeat(9000);
  let ok = 0;
  let refused = 0;
  for (let b = 0; b < 400 && refused === 0; b++) {
    const batch = Array.from({ length: 10 }, (_, i) => ({ name: 'e', channel: 'hung', data: `${b * 10 + i}:${data}` }));
    const r = await signedPost(srv.port, APP, 'batch_events', { batch });
    if (r.status === 200) ok += 10;
    else if (r.status === 503 && /cluster backend is (not taking publishes|down)/.test(r.text)) refused += 10;
    else t.fail(`batch ${b}: ${r.status} ${r.text}`);
  }
  t.ok(refused > 0, `answered 503 after ${ok} events (90 KiB a batch) to a hung server`);
  nats.thaw();
  await eventually(() => srv.server.cluster!.isUp(), 15_000, 'the node to see the server again');
  // the marker: a publish after the hang, once accepted
  await eventually(async () => (await signedPost(srv.port, APP, 'events', { name: 'marker', channel: 'hung', data: '{}' })).status === 200, 15_000, 'a publish accepted after SIGCONT');
  await c.event('marker', 'hung', 5000);
  t.equal(c.frames.filter((f) => f.event === 'e').length, ok, `the ${ok} events answered 200 were delivered, none of those answered 503`);
});
