// The primary as a bus endpoint (channels/bridge.ts): it publishes into the shards by
// interest, and receives each local API and client event once (the cluster adapters'
// bridge). Real server, raw WebSocket clients spread over the shards.

import t from 'tap';
import type { PublishFrame } from '../../src/bus/messages';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { start } from '../../src/main';
import { APP, RawClient, WORKERS, eventually } from '../helpers/server';
import Pusher from 'pusher';
import http from 'node:http';
import { signedPost } from '../helpers/http';

async function bridged(workers: number) {
  const config = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers, log: { level: 'error' }, apps: [{ ...APP }] } });
  const server = await start(config, createLogger(config.log), { bridge: true });
  const sdk = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(server.port), useTLS: false, agent: new http.Agent({ keepAlive: false }) });
  return { server, sdk, url: `ws://127.0.0.1:${server.port}/app/${APP.key}` };
}

t.test('the primary publishes into every shard with subscribers, and hears each local event once', async (t) => {
  const workers = Math.max(WORKERS, 2);
  const { server, sdk, url } = await bridged(workers);
  const clients: RawClient[] = [];
  t.teardown(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await server.stop();
  });
  for (let i = 0; i < 24 && (clients.length < 6 || new Set(clients.map((c) => c.socketId.split('.')[0])).size < 2); i++) {
    clients.push(await RawClient.connect(url));
  }
  t.ok(new Set(clients.map((c) => c.socketId.split('.')[0])).size >= 2, 'subscribers on at least two shards');
  for (const c of clients) await c.subscribeAuthed('private-b');

  const local: PublishFrame[] = [];
  const flags = new Map<string, boolean | undefined>();
  server.bridge!.onLocal((f, delta) => {
    local.push(f);
    flags.set(Buffer.from(f.message).toString(), delta);
  });

  // primary → shards
  const message = '{"event":"from-elsewhere","channel":"private-b","data":"{\\"n\\":1}"}';
  server.bridge!.publish(APP.id, 'private-b', '', message);
  for (const c of clients) {
    const f = await c.event('from-elsewhere', 'private-b', 5000);
    t.equal(f.data, '{"n":1}');
  }
  // excluded socket, across shards
  server.bridge!.publish(APP.id, 'private-b', clients[0].socketId, message.replace('from-elsewhere', 'second'));
  for (const c of clients.slice(1)) await c.event('second', 'private-b', 5000);
  // marker after: the excluded socket got neither 'second' nor anything else before it
  server.bridge!.publish(APP.id, 'private-b', '', message.replace('from-elsewhere', 'marker'));
  await clients[0].event('marker', 'private-b', 5000);
  t.notOk(clients[0].frames.some((f) => f.event === 'second'), 'the excluded socket did not get it');
  t.equal(local.length, 0, 'what the primary published is not handed back to it');

  // shards → primary: an API event and a client event, once each
  await sdk.trigger('private-b', 'api-ev', { x: 1 }, { socket_id: clients[1].socketId });
  clients[2].send({ event: 'client-typing', channel: 'private-b', data: { y: 2 } });
  await eventually(() => local.length >= 2, 5000, 'both events at the primary');
  await clients[3].event('client-typing', 'private-b', 5000);
  await sdk.trigger('private-b', 'api-marker', {});
  await eventually(() => local.some((f) => Buffer.from(f.message).toString().includes('api-marker')), 5000, 'the marker at the primary');
  const texts = local.map((f) => ({ except: f.except, channel: f.channel, app: f.app, message: Buffer.from(f.message).toString() }));
  t.same(texts.filter((x) => x.message.includes('"api-ev"')).length, 1, 'the API event once');
  t.match(texts.find((x) => x.message.includes('"api-ev"')), { app: APP.id, channel: 'private-b', except: clients[1].socketId });
  t.same(texts.filter((x) => x.message.includes('client-typing')).length, 1, 'the client event once');
  t.match(texts.find((x) => x.message.includes('client-typing')), { except: clients[2].socketId });

  // a publish's "delta" reaches the primary with it (the cluster adapters carry it on)
  for (const delta of [false, true]) {
    const r = await signedPost(server.port, APP, 'events', { name: `delta-${delta}`, channel: 'private-b', data: '{}', delta });
    t.equal(r.status, 200);
  }
  await eventually(() => local.some((f) => Buffer.from(f.message).toString().includes('delta-true')), 5000, 'both flagged publishes at the primary');
  const flagOf = (event: string) => [...flags].find(([m]) => m.includes(`"${event}"`))?.[1];
  t.equal(flagOf('delta-false'), false, '"delta": false');
  t.equal(flagOf('delta-true'), true, '"delta": true');
  t.equal(flagOf('api-ev'), undefined, 'no "delta": the configuration decides');
});

t.test('without the bridge option there is no bridge and nothing is copied to the primary', async (t) => {
  const config = loadConfig({ env: {}, overrides: { host: '127.0.0.1', port: 0, workers: WORKERS, log: { level: 'error' }, apps: [{ ...APP }] } });
  const server = await start(config, createLogger(config.log));
  t.teardown(() => server.stop());
  t.equal(server.bridge, null);
});
