// Browser chat: one command serves a chat page (examples/chat/index.html) and the backend
// it needs, next to a running ringcast.
//
//   terminal 1:  make build && node bin/ringcast.js start --config examples/chat/config.yaml
//                (ringcast on :6001: history of chat-log, hooks answered by this backend;
//                `make run` works too, without history and hooks)
//   terminal 2:  node dist/examples/chat-server.js
//   browser:     http://localhost:8080/  (open it in two tabs, pick two names; "Mallory" is refused)
//
// What it serves:
//   GET  /               the page: pusher-js joins presence-chat (member list, a typing
//                        indicator as a client event, client-typing), reads chat-log (the
//                        last messages on joining: rewind; the ones missed while offline:
//                        withRecovery) and posts messages to /messages
//   GET  /pusher.min.js  pusher-js's browser build, from node_modules
//   GET  /client/recovery.js  ringcast's recovery plug-in (client/), an ES module
//   GET  /config.json    where the page finds ringcast (key, host, port, channels)
//   POST /pusher/auth    signs private- and presence- subscriptions with the app secret
//                        (the `pusher` SDK's authorizeChannel)
//   POST /messages       {"name","text"}: published to chat-log as `message` with the
//                        `pusher` SDK (a backend publishing through the HTTP API)
//   POST /ringcast-hooks ringcast's backend hooks (examples/hooks-backend.ts): refuses
//                        blocked names in presence-chat, stars bad words out of messages
//
// A demo, not an identity system: the page says who it is (its name and a random id) and
// the auth endpoint believes it. A real backend signs only for the user its session
// authenticated.
//
// Options: --port 8080 --ringcast-host 127.0.0.1 --ringcast-port 6001 --public-host
// (the host name the browser uses for ringcast; default: the host the page was loaded
// from) --public-port (default: --ringcast-port). The app credentials are config.yaml's (app-id / app-key / app-secret), or
// --app-id / --key / --secret.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Pusher from 'pusher';
import { arg, listen } from './cli';
import { HOOKS_PATH, answerHookCall } from './hooks-backend';

/** Who is here and who is typing. */
export const CHANNEL = 'presence-chat';
/** The messages: a history channel in examples/chat/config.yaml (public: the page reads it unsigned). */
export const LOG_CHANNEL = 'chat-log';
export const MAX_NAME = 40;
export const MAX_TEXT = 1000;
const MAX_BODY = 16 * 1024;

export interface ChatServerOptions {
  /** Port of the chat page (0: any free port). */
  port: number;
  /** Where this backend reaches ringcast's HTTP API. */
  ringcastHost: string;
  ringcastPort: number;
  /** Host the browser connects to; default: the host the page was loaded from. */
  publicHost?: string;
  /** Port the browser connects to; default: ringcastPort. */
  publicPort?: number;
  appId?: string;
  key?: string;
  secret?: string;
}

export interface ChatServer {
  port: number;
  close(): Promise<void>;
}

const PAGE_DIR = path.resolve(__dirname, '../../examples/chat');
const PUSHER_JS = path.resolve(__dirname, '../../node_modules/pusher-js/dist/web/pusher.min.js');
const RECOVERY_JS = path.resolve(__dirname, '../../client/recovery.js');

class BadRequest extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      // Past the bound the rest is read and thrown away, so the answer reaches the client.
      if (size > MAX_BODY) reject(new BadRequest(413, `body over ${MAX_BODY} bytes`));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function field(form: URLSearchParams, name: string, max: number): string {
  const v = form.get(name);
  if (v === null || v.length === 0) throw new BadRequest(400, `${name} is required`);
  if (v.length > max) throw new BadRequest(400, `${name} is longer than ${max} characters`);
  return v;
}

/** The presence identity the page claims (see the note at the top). */
function member(form: URLSearchParams): { user_id: string; user_info: { name: string } } {
  const id = field(form, 'user_id', 64);
  if (!/^[A-Za-z0-9_-]+$/.test(id)) throw new BadRequest(400, 'user_id may hold letters, digits, - and _ only');
  return { user_id: id, user_info: { name: field(form, 'name', MAX_NAME) } };
}

export async function startChatServer(opts: ChatServerOptions): Promise<ChatServer> {
  const app = { appId: opts.appId ?? 'app-id', key: opts.key ?? 'app-key', secret: opts.secret ?? 'app-secret' };
  const sdk = new Pusher({ ...app, host: opts.ringcastHost, port: String(opts.ringcastPort), useTLS: false });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = `${req.method ?? ''} ${url.pathname}`;
    if (route === 'GET /') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(fs.readFileSync(path.join(PAGE_DIR, 'index.html')));
    } else if (route === 'GET /pusher.min.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(fs.readFileSync(PUSHER_JS));
    } else if (route === 'GET /client/recovery.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(fs.readFileSync(RECOVERY_JS));
    } else if (route === 'GET /config.json') {
      const host = opts.publicHost ?? (req.headers.host ?? 'localhost').replace(/:\d+$/, '');
      res.writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ key: app.key, wsHost: host, wsPort: opts.publicPort ?? opts.ringcastPort, channel: CHANNEL, log: LOG_CHANNEL }));
    } else if (route === 'POST /pusher/auth') {
      const form = new URLSearchParams(await readBody(req));
      const socketId = field(form, 'socket_id', 64);
      const channel = field(form, 'channel_name', 200);
      let auth: Pusher.ChannelAuthResponse;
      if (channel === CHANNEL) auth = sdk.authorizeChannel(socketId, channel, member(form));
      else if (channel.startsWith('private-')) auth = sdk.authorizeChannel(socketId, channel);
      else throw new BadRequest(403, `this backend signs ${CHANNEL} and private- channels only, not ${channel}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(auth));
    } else if (route === 'POST /messages') {
      let body: unknown;
      try {
        body = JSON.parse(await readBody(req));
      } catch (e) {
        if (e instanceof BadRequest) throw e;
        throw new BadRequest(400, 'the body is not JSON');
      }
      const b = (body ?? {}) as Record<string, unknown>;
      const form = new URLSearchParams();
      for (const k of ['name', 'text']) if (typeof b[k] === 'string') form.set(k, b[k]);
      const message = { name: field(form, 'name', MAX_NAME), text: field(form, 'text', MAX_TEXT), at: Date.now() };
      await sdk.trigger(LOG_CHANNEL, 'message', message).catch((e: { status?: number; body?: string; error?: Error }) => {
        // The SDK's RequestError: ringcast's answer, or why there was none.
        throw new BadRequest(502, e.status
          ? `ringcast answered ${e.status}: ${e.body ?? ''}`
          : `cannot reach ringcast at ${opts.ringcastHost}:${opts.ringcastPort} (${e.error?.message ?? 'no answer'})`);
      });
      res.writeHead(204).end();
    } else if (route === `POST ${HOOKS_PATH}`) {
      const [status, answer] = answerHookCall(sdk, req.headers, await readBody(req));
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    } else {
      throw new BadRequest(404, `no route ${route}`);
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const status = e instanceof BadRequest ? e.status : 502;
      const error = e instanceof Error ? e.message : String(e);
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error }));
    });
  });
  return listen(server, opts.port);
}

if (require.main === module) {
  const port = Number(arg('port') ?? '8080');
  startChatServer({
    port,
    ringcastHost: arg('ringcast-host') ?? '127.0.0.1',
    ringcastPort: Number(arg('ringcast-port') ?? '6001'),
    publicHost: arg('public-host'),
    publicPort: arg('public-port') === undefined ? undefined : Number(arg('public-port')),
    appId: arg('app-id'),
    key: arg('key'),
    secret: arg('secret'),
  }).then(
    (s) => console.log(`chat page on http://localhost:${s.port}/ (open it in two tabs)`),
    (e: unknown) => {
      console.error(`chat-server: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
