// Presence chat: two pusher-js clients (Alice and Bob) join a presence channel on a
// running ringcast, see each other come and go, and receive a message that the
// "backend" publishes with the `pusher` server SDK.
//
// Run it:
//   terminal 1:  make run                                  (ringcast on :6001 with config.yaml)
//   terminal 2:  node dist/examples/presence-chat.js       (after `make build`)
//
// Options: --host 127.0.0.1 --port 6001 (defaults). The app credentials are those of
// config.yaml (app-id / app-key / app-secret). It prints what happens and exits 0.
//
// The same code runs in the test suite against a test server: see `run()` below and
// test/e2e/example.test.ts.

import http from 'node:http';
import Pusher from 'pusher';
import PusherJS, { type Members, type PresenceChannel } from 'pusher-js';
import { runAgainstRingcast } from './cli';

export interface ExampleOptions {
  host: string;
  port: number;
  appId?: string;
  key?: string;
  secret?: string;
  channel?: string;
  /** Where the story goes (default: console.log). */
  log?: (line: string) => void;
  /** Gives up after this long (default 10 s). */
  timeoutMs?: number;
}

export interface Member {
  id: string;
  info: { name: string };
}

export interface ExampleResult {
  /** Members Alice saw when she joined (herself only), and Bob saw when he joined. */
  aliceJoined: Member[];
  bobJoined: Member[];
  /** Member events Alice received. */
  aliceSaw: string[];
  /** The message as each client received it. */
  aliceGot: unknown;
  bobGot: unknown;
}

const CONFIG_YAML_APP = { appId: 'app-id', key: 'app-key', secret: 'app-secret' };

export async function run(opts: ExampleOptions): Promise<ExampleResult> {
  const { host, port } = opts;
  const appId = opts.appId ?? CONFIG_YAML_APP.appId;
  const key = opts.key ?? CONFIG_YAML_APP.key;
  const secret = opts.secret ?? CONFIG_YAML_APP.secret;
  const channelName = opts.channel ?? 'presence-chat';
  const log = opts.log ?? ((line: string) => console.log(line));

  // ── The application's backend ────────────────────────────────────────────────
  // It holds the app secret: it publishes events and signs channel subscriptions.
  // (No keep-alive, so that this short-lived script leaves no idle connection behind.)
  const backend = new Pusher({
    appId, key, secret, host, port: String(port), useTLS: false,
    agent: new http.Agent({ keepAlive: false }),
  });

  // ── The browsers ─────────────────────────────────────────────────────────────
  // pusher-js asks the app's auth endpoint to sign each private/presence subscription.
  // A real app serves that endpoint on its backend (e.g. POST /pusher/auth, which
  // checks the user's session and calls pusher.authorizeChannel); the secret never
  // reaches the browser. This example has no web server, so the "endpoint" is a
  // function that calls the backend SDK directly.
  function browser(user: Member): PusherJS {
    return new PusherJS(key, {
      cluster: 'mt1', // required by the typings; wsHost/wsPort below decide where it connects
      wsHost: host,
      wsPort: port,
      forceTLS: false,
      enabledTransports: ['ws'],
      disableStats: true,
      channelAuthorization: {
        endpoint: '/pusher/auth',
        transport: 'ajax',
        customHandler: ({ socketId, channelName: name }, callback) => {
          callback(null, backend.authorizeChannel(socketId, name, { user_id: user.id, user_info: user.info }));
        },
      },
    });
  }

  const alice: Member = { id: 'alice', info: { name: 'Alice' } };
  const bob: Member = { id: 'bob', info: { name: 'Bob' } };
  const clients: PusherJS[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from ringcast at ${host}:${port} within ${opts.timeoutMs ?? 10_000} ms`)), opts.timeoutMs ?? 10_000);
  });

  async function join(user: Member): Promise<{ client: PusherJS; channel: PresenceChannel; members: Member[] }> {
    const client = browser(user);
    clients.push(client);
    const channel = client.subscribe(channelName) as PresenceChannel;
    const members = await new Promise<Member[]>((resolve, reject) => {
      channel.bind('pusher:subscription_succeeded', (m: Members) => {
        const list: Member[] = [];
        m.each((member: Member) => list.push({ id: member.id, info: member.info }));
        resolve(list);
      });
      channel.bind('pusher:subscription_error', (err: unknown) => reject(new Error(`subscription refused: ${JSON.stringify(err)}`)));
    });
    log(`${user.info.name} joined ${channelName} as socket ${client.connection.socket_id}; members: ${members.map((m) => m.info.name).join(', ')}`);
    return { client, channel, members };
  }

  const story = async (): Promise<ExampleResult> => {
    log(`connecting to ringcast at ws://${host}:${port}/app/${key}`);
    const a = await join(alice);
    const aliceSaw: string[] = [];
    const bobArrived = new Promise<void>((resolve) => {
      a.channel.bind('pusher:member_added', (m: Member) => {
        aliceSaw.push(`added ${m.id}`);
        log(`Alice sees ${m.info.name} arrive`);
        resolve();
      });
    });
    const bobLeft = new Promise<void>((resolve) => {
      a.channel.bind('pusher:member_removed', (m: Member) => {
        aliceSaw.push(`removed ${m.id}`);
        log(`Alice sees ${m.info.name} leave`);
        resolve();
      });
    });
    const b = await join(bob);
    await bobArrived;

    // The backend publishes a chat message; both browsers get it.
    const received = (who: string, channel: PresenceChannel) => new Promise<unknown>((resolve) => {
      channel.bind('chat-message', (data: { from: string; text: string }) => {
        log(`${who} received chat-message from ${data.from}: "${data.text}"`);
        resolve(data);
      });
    });
    const aliceGot = received('Alice', a.channel);
    const bobGot = received('Bob', b.channel);
    const res = await backend.trigger(channelName, 'chat-message', { from: 'backend', text: 'Welcome to the room!' });
    log(`backend: POST /apps/${appId}/events answered ${res.status}`);

    const result = { aliceJoined: a.members, bobJoined: b.members, aliceGot: await aliceGot, bobGot: await bobGot, aliceSaw };
    b.client.disconnect();
    await bobLeft;
    return result;
  };

  try {
    return await Promise.race([story(), timeout]);
  } finally {
    clearTimeout(timer);
    for (const c of clients) c.disconnect();
    log('done');
  }
}

if (require.main === module) runAgainstRingcast('presence-chat', run);
