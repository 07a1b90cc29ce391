// Backend hooks for the chat example (PROTOCOL.md "Backend hooks", docs/hooks.md): ringcast
// asks this backend before it lets something happen, and the answer allows, denies or
// rewrites it. examples/chat-server.ts answers them on POST /ringcast-hooks, as
// examples/chat/config.yaml tells ringcast:
//
//   subscribe  presence-chat: a name on the blocked list is refused; the page shows
//              "could not join: <reason>" (pusher:subscription_error, status 403)
//   publish    chat-log: the words on the list are starred out of a message's text
//              before anyone gets it or history stores it
//
// Every call is signed like a webhook (X-Pusher-Key, X-Pusher-Signature: the HMAC-SHA256
// of the raw body with the app secret), so the `pusher` SDK's webhook() checks it; an
// unsigned or wrongly signed call is answered 401 and ringcast treats it as a failure
// (on_failure: deny refuses the operation).
//
// Alone, for another app: node dist/examples/hooks-backend.js --port 3000 (and the app's
// hooks.url: http://127.0.0.1:3000/ringcast-hooks); the credentials as chat-server.ts takes them.

import http from 'node:http';
import Pusher from 'pusher';
import { arg, listen } from './cli';

export const HOOKS_PATH = '/ringcast-hooks';

export interface HooksPolicy {
  /** Member names refused in the presence channel (compared without case). */
  blocked: string[];
  /** Words starred out of messages (whole words, without case). */
  words: string[];
}

export const POLICY: HooksPolicy = { blocked: ['mallory'], words: ['darn', 'heck'] };

/** The fields of a hook call this backend reads (PROTOCOL.md has them all). */
interface HookCall {
  hook?: string;
  channel?: string;
  channel_data?: string;
  event?: string;
  data?: unknown;
}

type Answer = { allow: true; data?: string } | { allow: false; reason: string };

/** What the backend answers to one call. */
export function decide(call: HookCall, policy: HooksPolicy = POLICY): Answer {
  if (call.hook === 'subscribe' && typeof call.channel_data === 'string') {
    const member = JSON.parse(call.channel_data) as { user_info?: { name?: unknown } };
    const name = member.user_info?.name;
    if (typeof name === 'string' && policy.blocked.includes(name.toLowerCase())) {
      return { allow: false, reason: `${name} is not welcome in ${call.channel ?? 'this channel'}` };
    }
  }
  // A publish's data is the string the API got: a message is {"name","text","at"}.
  if (call.hook === 'publish' && call.event === 'message' && typeof call.data === 'string' && policy.words.length > 0) {
    const message = JSON.parse(call.data) as { text?: unknown };
    if (typeof message.text === 'string') {
      const bad = new RegExp(`\\b(${policy.words.join('|')})\\b`, 'gi');
      return { allow: true, data: JSON.stringify({ ...message, text: message.text.replace(bad, (w) => '*'.repeat(w.length)) }) };
    }
  }
  return { allow: true };
}

/** One hook call: its status and JSON body (401: not JSON signed with the app's key and secret). */
export function answerHookCall(sdk: Pusher, headers: http.IncomingHttpHeaders, rawBody: string, policy: HooksPolicy = POLICY): [number, object] {
  const call = sdk.webhook({ headers, rawBody });
  if (!call.isValid()) return [401, { error: 'the call is not JSON signed with this app\'s key and secret' }];
  try {
    return [200, decide(call.getData() as unknown as HookCall, policy)];
  } catch {
    return [400, { error: 'the call\'s channel_data or data is not JSON' }];
  }
}

/** Largest call read when run alone (chat-server.ts has its own bound). */
const MAX_CALL_BYTES = 256 * 1024;

/** The hooks endpoint alone, on 127.0.0.1:port (0: any free port). */
export async function startHooksBackend(opts: { port: number; appId?: string; key?: string; secret?: string }): Promise<{ port: number; close(): Promise<void> }> {
  // (host: the SDK needs one; only its webhook check is used here)
  const sdk = new Pusher({ appId: opts.appId ?? 'app-id', key: opts.key ?? 'app-key', secret: opts.secret ?? 'app-secret', host: '127.0.0.1' });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_CALL_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      const [status, body] = size > MAX_CALL_BYTES ? [413, { error: `call over ${MAX_CALL_BYTES} bytes` }]
        : req.method === 'POST' && req.url === HOOKS_PATH ? answerHookCall(sdk, req.headers, Buffer.concat(chunks).toString('utf8'))
          : [404, { error: `no route ${req.method ?? ''} ${req.url ?? ''}` }];
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  return listen(server, opts.port, '127.0.0.1');
}

if (require.main === module) {
  startHooksBackend({ port: Number(arg('port') ?? '3000'), appId: arg('app-id'), key: arg('key'), secret: arg('secret') }).then(
    (b) => console.log(`hooks on http://127.0.0.1:${b.port}${HOOKS_PATH}`),
    (e: unknown) => {
      console.error(`hooks-backend: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
