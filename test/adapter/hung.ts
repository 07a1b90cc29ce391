// The checks of a hung Redis (SIGSTOP: connections open, nothing answered) shared by the
// single-server suite (redis-hung.test.ts) and the Redis Cluster one
// (redis-cluster-hung.test.ts): the adapter's publisher caps what it holds
// (MAX_PUBLISHES_IN_FLIGHT commands / MAX_PUBLISH_BUFFER_BYTES), also past the 1 s command
// timeout, and drains after SIGCONT; a server answers API publishes 503 (nothing
// delivered) once its publisher's backlog is past half the cap, so every publish answered
// 200 was sent to the cluster, and publishes to the cluster again after SIGCONT.

import type { Test } from 'tap';
import { MAX_PUBLISHES_IN_FLIGHT, MAX_PUBLISH_BUFFER_BYTES } from '../../src/adapter/redis';
import type { Transport } from '../../src/adapter/transport';
import type { ConfigInput } from '../../src/config';
import { metric } from '../faults/api';
import { signedPost } from '../helpers/http';
import { APP, RawClient, eventually, sleep, startServer } from '../helpers/server';

export interface Hang {
  freeze(): void;
  thaw(): void;
}

type Publisher = Transport & { inFlight(): { commands: number; bytes: number } };

/** `pub` and `sub` connected; publishes on `subject` through a hang of `backend`. */
export async function publisherCapHolds(t: Test, pub: Publisher, sub: Transport, subject: string, backend: Hang): Promise<void> {
  const got: string[] = [];
  await sub.subscribe(subject, (d) => got.push(Buffer.from(d).toString()));
  await eventually(() => {
    pub.publish(subject, Buffer.from('before'));
    return got.includes('before');
  }, 5000, 'the first message');
  // nothing in flight when the backend hangs (a 'before' answered later would free a place)
  await eventually(() => pub.inFlight().commands === 0, 5000, 'the first publishes answered');

  backend.freeze();
  const payload = 'x'.repeat(1000);
  let accepted = 0;
  for (let i = 0; i < 20_000; i++) if (pub.publish(subject, Buffer.from(`${i}:${payload}`))) accepted++;
  t.ok(accepted <= MAX_PUBLISHES_IN_FLIGHT, `${accepted} of 20000 accepted while Redis hangs (cap ${MAX_PUBLISHES_IN_FLIGHT})`);
  t.ok(accepted >= 100, 'the cap is not hit before it is reached');
  const held = pub.inFlight();
  t.ok(held.commands <= MAX_PUBLISHES_IN_FLIGHT, `${held.commands} commands in flight`);
  t.ok(held.bytes <= MAX_PUBLISH_BUFFER_BYTES + 1100, `${held.bytes} bytes waiting in the socket(s)`);
  t.ok(pub.isUp(), 'ioredis still reports the connection ready (why a cap is needed)');

  // the 1 s command timeout rejects the waiting commands but does not free the cap
  const end = Date.now() + 2500;
  let later = 0;
  while (Date.now() < end) {
    if (pub.publish(subject, Buffer.from('during'))) later++;
    await sleep(50);
  }
  t.equal(later, 0, 'still refused 2.5 s later (past the command timeout): the queue stays bounded');
  t.ok(pub.inFlight().commands <= MAX_PUBLISHES_IN_FLIGHT, 'and the commands in flight too');

  backend.thaw();
  await eventually(() => pub.publish(subject, Buffer.from('after')), 15_000, 'a publish accepted after SIGCONT');
  await eventually(() => got.includes('after'), 15_000, 'the message after SIGCONT');
  t.equal(got.filter((m) => m.endsWith(payload)).length, accepted, 'every publish accepted during the hang was delivered');
  await eventually(() => pub.inFlight().commands === 0, 5000, 'the queue to drain');
}

/** A server on `overrides` (a redis adapter): API publishes through a hang of `backend`. */
export async function serverThroughHang(t: Test, overrides: ConfigInput, backend: Hang): Promise<void> {
  const srv = await startServer({ ...overrides, metrics: { enabled: true, port: 0, host: '127.0.0.1' } });
  t.teardown(() => srv.stop());
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('hung');
  const published = () => metric(srv.server.metricsPort!, 'adapter_publish_total');
  const refused = () => metric(srv.server.metricsPort!, 'adapter_errors_total');
  const base = await published();
  const errorsBase = await refused();

  backend.freeze();
  const N = 1500;
  let ok = 0;
  let busy = 0;
  for (let b = 0; b < N / 10; b++) {
    const batch = Array.from({ length: 10 }, (_, i) => ({ name: 'e', channel: 'hung', data: `${b * 10 + i}` }));
    const r = await signedPost(srv.port, APP, 'batch_events', { batch });
    if (r.status === 200) ok += 10;
    else if (r.status === 503 && /cluster backend is not taking publishes/.test(r.text)) busy += 10;
    else t.fail(`batch ${b}: ${r.status} ${r.text}`);
  }
  // the marker: a publish the client gets on its own connection after the events it got
  await c.sync();
  const delivered = c.frames.filter((f) => f.event === 'e').length;
  t.ok(busy > 0, `${busy} events answered 503 once the publisher's backlog passed half its cap`);
  t.equal(delivered, ok, `the ${ok} events answered 200 were delivered locally, none of the ${busy} answered 503`);
  const sent = (await published()) - base;
  t.ok(sent <= MAX_PUBLISHES_IN_FLIGHT, `${sent} cluster publishes sent while Redis hangs (cap ${MAX_PUBLISHES_IN_FLIGHT})`);
  t.equal(sent, ok, 'every event answered 200 was sent to the cluster: none refused by the cap');
  t.equal(await refused() - errorsBase, 0, 'nothing refused (adapter_errors_total)');

  backend.thaw();
  const before = await published();
  await eventually(async () => {
    await signedPost(srv.port, APP, 'events', { name: 'e2', channel: 'hung', data: 'after' });
    return (await published()) > before;
  }, 15_000, 'cluster publishes to resume after SIGCONT');
  t.pass('publishing resumed');
}
