// Laravel Echo against ringcast: what a Laravel app's front end does with Echo 2
// (`broadcaster: 'pusher'`, stock pusher-js), run in Node against a running ringcast, with
// the app's backend played by the `pusher` server SDK and a small auth endpoint.
//
//   1. public channel:   Echo.channel('orders').listen('.OrderShipped', …) and .listen('OrderPaid', …)
//   2. private channel:  Echo.private('orders.alice'), signed by the auth endpoint (authEndpoint,
//                        a bearer token); Bob asking for Alice's channel gets .error() with 403
//   3. presence channel: Echo.join('room') with .here / .joining / .leaving, and
//                        .whisper / .listenForWhisper between Alice and Bob
//   4. history:          a late Echo subscriber gets the last 5 messages (rewind), and Alice,
//                        with withRecovery(Echo.connector.pusher) from client/recovery.js,
//                        gets exactly the messages she missed while offline
//
// Run it:
//   terminal 1:  make run                                (ringcast on :6001 with config.yaml)
//   terminal 2:  node dist/examples/echo-client.js       (after `make build`)
//
// Options: --host 127.0.0.1 --port 6001 (defaults). The app credentials are those of
// config.yaml (app-id / app-key / app-secret), whose channel_history keeps `history-*`
// channels (size 100, rewind 5). It prints what happens and exits 0.
//
// The same code runs in the test suite against a test server: see `run()` below and
// test/e2e/echo-example.test.ts.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type EchoType from 'laravel-echo';
import Pusher from 'pusher';
import PusherJS from 'pusher-js';
import { runAgainstRingcast } from './cli';

export interface EchoExampleOptions {
  host: string;
  port: number;
  appId?: string;
  key?: string;
  secret?: string;
  /** Where the story goes (default: console.log). */
  log?: (line: string) => void;
  /** Gives up after this long (default 15 s). */
  timeoutMs?: number;
}

/** A user as the auth endpoint knows it (Laravel: the authenticated user). */
export interface User {
  id: string;
  name: string;
}

export interface EchoExampleResult {
  /** What Alice's listeners on `orders` received, in order: [listener, data]. */
  orders: [string, unknown][];
  /** What Alice received on her private channel `private-orders.alice`. */
  privateOrders: unknown[];
  /** The error Bob's Echo reported when he asked for Alice's private channel. */
  bobDenied: { type?: string; status?: number };
  /** Presence: `.here` of each client, `.joining` / `.leaving` as Alice saw them. */
  aliceHere: User[];
  bobHere: User[];
  aliceSawJoining: User[];
  aliceSawLeaving: User[];
  /** Whispers Alice got from Bob (`client-typing` on the wire). */
  whispers: unknown[];
  /** The history channel this run used (`history-feed.<run id>`, new each run). */
  historyChannel: string;
  /** Message numbers Carol (stock Echo, subscribed late) received: the rewind, then live ones. */
  carolGot: number[];
  /** Message numbers Alice (Echo + withRecovery) received, across her time offline. */
  aliceGot: number[];
  /** Alice's position in the history channel at the end (withRecovery's `positions`). */
  alicePosition: { epoch: string; serial: number } | undefined;
}

const CONFIG_YAML_APP = { appId: 'app-id', key: 'app-key', secret: 'app-secret' };

/** Bearer tokens the auth endpoint accepts (a Laravel app: Sanctum tokens or the session). */
const USERS: Record<string, User> = {
  'alice-token': { id: 'alice', name: 'Alice' },
  'bob-token': { id: 'bob', name: 'Bob' },
  'carol-token': { id: 'carol', name: 'Carol' },
};

// laravel-echo and client/recovery.js are ES modules: imported as such, past tsc's
// CommonJS rewrite of import() (laravel-echo's CommonJS build does not load under Node 20).
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importEsm = new Function('s', 'return import(s)') as <T>(s: string) => Promise<T>;
type RecoveryModule = Pick<typeof import('../client/index.js'), 'withRecovery'>;
/** client/recovery.js, from dist/examples/ where this file runs. */
const RECOVERY = pathToFileURL(path.resolve(__dirname, '..', '..', 'client', 'recovery.js')).href;

/**
 * The backend's channel authorization endpoint, as Laravel's POST /broadcasting/auth:
 * the user comes from the bearer token, routes/channels.php's rules become `allowed`.
 */
export function startAuthEndpoint(backend: Pusher): Promise<{ url: string; close(): Promise<void> }> {
  const answer = (res: http.ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/broadcasting/auth') return answer(res, 404, { error: 'POST /broadcasting/auth only' });
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 4096) req.destroy();
    });
    req.on('end', () => {
      const user = USERS[(req.headers.authorization ?? '').replace(/^Bearer /, '')];
      if (!user) return answer(res, 401, { error: 'unknown or missing bearer token' });
      const form = new URLSearchParams(body);
      const socketId = form.get('socket_id');
      const channel = form.get('channel_name');
      if (!socketId || !channel) return answer(res, 400, { error: 'socket_id and channel_name are required' });
      // routes/channels.php: Broadcast::channel('orders.{id}', fn ($user, $id) => $user->id === $id);
      //                      Broadcast::channel('room', fn ($user) => ['id' => $user->id, 'name' => $user->name]);
      if (channel === `private-orders.${user.id}`) return answer(res, 200, backend.authorizeChannel(socketId, channel));
      if (channel === 'presence-room') return answer(res, 200, backend.authorizeChannel(socketId, channel, { user_id: user.id, user_info: user }));
      return answer(res, 403, { error: `${user.id} may not subscribe to ${channel}` });
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject).listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/broadcasting/auth`,
        close: () => new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
      });
    });
  });
}

export async function run(opts: EchoExampleOptions): Promise<EchoExampleResult> {
  const { host, port } = opts;
  const appId = opts.appId ?? CONFIG_YAML_APP.appId;
  const key = opts.key ?? CONFIG_YAML_APP.key;
  const secret = opts.secret ?? CONFIG_YAML_APP.secret;
  const log = opts.log ?? ((line: string) => console.log(line));
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const { default: Echo } = await importEsm<{ default: typeof EchoType }>('laravel-echo');
  const { withRecovery } = await importEsm<RecoveryModule>(RECOVERY);

  // ── The Laravel app's backend ────────────────────────────────────────────────
  // It holds the app secret: it broadcasts events (Laravel's pusher driver does exactly
  // this SDK call) and signs private/presence subscriptions at its auth endpoint.
  // (No keep-alive, so that this short-lived script leaves no idle connection behind.)
  const backend = new Pusher({
    appId, key, secret, host, port: String(port), useTLS: false,
    agent: new http.Agent({ keepAlive: false }),
  });
  const auth = await startAuthEndpoint(backend);

  // ── The browsers ─────────────────────────────────────────────────────────────
  // resources/js/echo.js of a Laravel app, with ringcast's host and port.
  const echos: EchoType<'pusher'>[] = [];
  const echoFor = (token: string): EchoType<'pusher'> => {
    const echo = new Echo({
      broadcaster: 'pusher',
      Pusher: PusherJS,
      key,
      cluster: 'mt1', // required by pusher-js's typings; wsHost/wsPort decide where it connects
      wsHost: host,
      wsPort: port,
      forceTLS: false,
      enabledTransports: ['ws'],
      disableStats: true,
      authEndpoint: auth.url,
      // Who the user is, for the auth endpoint (a browser would send its session cookie).
      // Echo's `bearerToken` option writes into a defaults object that all Echo instances of
      // one process share, so with three users in one process the header is given per instance.
      auth: { headers: { Authorization: `Bearer ${token}` } },
    });
    echos.push(echo);
    return echo;
  };
  const subscribed = (channel: { subscribed(cb: () => void): unknown; error(cb: (e: unknown) => void): unknown }, name: string) =>
    new Promise<void>((resolve, reject) => {
      channel.subscribed(resolve);
      channel.error((e: unknown) => reject(new Error(`subscription to ${name} refused: ${JSON.stringify(e)}`)));
    });
  /** Resolves when `check()` holds, tested after every event a listener records. */
  const waiters = new Set<() => void>();
  const changed = (): void => waiters.forEach((w) => w());
  const until = (check: () => boolean): Promise<void> => new Promise((resolve) => {
    const w = (): void => {
      if (check()) {
        waiters.delete(w);
        resolve();
      }
    };
    waiters.add(w);
    w();
  });

  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from ringcast at ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
  });

  const story = async (): Promise<EchoExampleResult> => {
    log(`connecting Echo (broadcaster: pusher) to ringcast at ws://${host}:${port}/app/${key}; auth endpoint ${auth.url}`);
    const alice = echoFor('alice-token');
    const bob = echoFor('bob-token');
    // Alice's client resumes history channels exactly after a reconnect (installed before it subscribes).
    const recovery = withRecovery(alice.connector.pusher, { channels: (name) => name.startsWith('history-') });

    // 1. A public channel. Echo prefixes event names with its namespace (App.Events) unless
    //    they start with a dot: '.OrderShipped' is the event named OrderShipped (a Laravel
    //    event with broadcastAs() = 'OrderShipped'), 'OrderPaid' is App\Events\OrderPaid (the
    //    class name, Laravel's default).
    const orders: [string, unknown][] = [];
    const ordersChannel = alice.channel('orders')
      .listen('.OrderShipped', (d: unknown) => { orders.push(['.OrderShipped', d]); log(`Alice: .OrderShipped on orders ${JSON.stringify(d)}`); changed(); })
      .listen('OrderPaid', (d: unknown) => { orders.push(['OrderPaid', d]); log(`Alice: OrderPaid (App\\Events\\OrderPaid) on orders ${JSON.stringify(d)}`); changed(); });
    await subscribed(ordersChannel, 'orders');
    await backend.trigger('orders', 'App\\Events\\OrderPaid', { order: 1001 });
    await backend.trigger('orders', 'OrderShipped', { order: 1001, carrier: 'DHL' });
    await until(() => orders.length === 2);

    // 2. A private channel: pusher-js asks the auth endpoint (authEndpoint, with the bearer
    //    token) to sign the subscription; only Alice may have private-orders.alice.
    const privateOrders: unknown[] = [];
    const mine = alice.private('orders.alice')
      .listen('.OrderStatus', (d: unknown) => { privateOrders.push(d); log(`Alice: .OrderStatus on private-orders.alice ${JSON.stringify(d)}`); changed(); });
    await subscribed(mine, 'private-orders.alice');
    const bobDenied = await new Promise<{ type?: string; status?: number }>((resolve) => {
      bob.private('orders.alice').error((e: { type?: string; status?: number }) => resolve(e));
    });
    log(`Bob: Echo.private('orders.alice') refused: ${bobDenied.type} ${bobDenied.status}`);
    bob.leave('orders.alice');
    await backend.trigger('private-orders.alice', 'OrderStatus', { order: 1001, status: 'out for delivery' });
    await until(() => privateOrders.length === 1);

    // 3. A presence channel: Echo.join('room') is presence-room; who is here, who comes and
    //    goes, and whispers (client events) between the members.
    const aliceSawJoining: User[] = [];
    const aliceSawLeaving: User[] = [];
    const whispers: unknown[] = [];
    const aliceHere = await new Promise<User[]>((resolve, reject) => {
      alice.join('room')
        .here((users: User[]) => resolve(users))
        .joining((u: User) => { aliceSawJoining.push(u); log(`Alice: ${u.name} joins the room`); changed(); })
        .leaving((u: User) => { aliceSawLeaving.push(u); log(`Alice: ${u.name} leaves the room`); changed(); })
        .listenForWhisper('typing', (d: unknown) => { whispers.push(d); log(`Alice: whisper typing ${JSON.stringify(d)}`); changed(); })
        .error((e: unknown) => reject(new Error(`presence-room refused: ${JSON.stringify(e)}`)));
    });
    log(`Alice: here in room: ${aliceHere.map((u) => u.name).join(', ')}`);
    const bobRoom = bob.join('room');
    const bobHere = await new Promise<User[]>((resolve) => bobRoom.here((users: User[]) => resolve(users)));
    log(`Bob: here in room: ${bobHere.map((u) => u.name).join(', ')}`);
    await until(() => aliceSawJoining.length === 1);
    bobRoom.whisper('typing', { name: 'Bob', typing: true });
    await until(() => whispers.length === 1);
    bob.leave('room');
    await until(() => aliceSawLeaving.length === 1);
    alice.leave('room');

    // 4. History (config.yaml: channel_history 'history-*', rewind 5). A channel new to this
    //    run, so earlier runs' messages are not in its rewind.
    const historyChannel = `history-feed.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    const aliceGot: number[] = [];
    const carolGot: number[] = [];
    let published = 0;
    const publish = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await backend.trigger(historyChannel, 'FeedUpdate', { n: ++published });
    };
    // Alice subscribes before anything is published; withRecovery asks for positions.
    const feed = alice.channel(historyChannel)
      .listen('.FeedUpdate', (d: { n: number }) => { aliceGot.push(d.n); changed(); });
    await subscribed(feed, historyChannel);
    await publish(7);
    await until(() => aliceGot.length === 7);
    log(`backend: published 1..7 on ${historyChannel}; Alice got ${aliceGot.join(',')}`);

    // Carol subscribes late with a stock Echo: the rewind gives her the last 5, then live ones.
    const carol = echoFor('carol-token');
    carol.channel(historyChannel).listen('.FeedUpdate', (d: { n: number }) => { carolGot.push(d.n); changed(); });
    await until(() => carolGot.length === 5);
    log(`Carol (late): rewind gave her ${carolGot.join(',')}`);

    // Alice goes offline (a closed laptop); 8 messages pass, more than the rewind holds.
    alice.connector.pusher.disconnect();
    log('Alice: offline');
    await publish(8);
    await until(() => carolGot.length === 13);
    log(`backend: published 8..15 while Alice was offline; Carol got them live`);

    // Back online: pusher-js resubscribes; withRecovery's `recover` resumes after the last
    // message Alice got, so she gets 8..15 exactly (no rewind, no gap, no duplicate).
    alice.connector.pusher.connect();
    await until(() => aliceGot.length === 15);
    log(`Alice: back online, recovered ${aliceGot.slice(7).join(',')}`);
    // One more live message: both get it, and nothing else arrived before it.
    await publish(1);
    await until(() => aliceGot.length >= 16 && carolGot.length >= 14);
    const alicePosition = recovery.positions.get(historyChannel);
    log(`Alice: ${aliceGot.length} messages (${aliceGot.join(',')}), position serial ${alicePosition?.serial}`);

    return {
      orders, privateOrders, bobDenied, aliceHere, bobHere, aliceSawJoining, aliceSawLeaving, whispers,
      historyChannel, carolGot, aliceGot, alicePosition: alicePosition && { ...alicePosition },
    };
  };

  try {
    return await Promise.race([story(), timeout]);
  } finally {
    clearTimeout(timer);
    waiters.clear();
    for (const e of echos) e.disconnect();
    await auth.close();
    log('done');
  }
}

if (require.main === module) runAgainstRingcast('echo-client', run);
