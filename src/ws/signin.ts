// pusher:signin (Pusher user authentication): a socket proves who its user is with a
// signature over `socket_id::user::user_data`. A signed-in socket receives what the API
// publishes to '#server-to-user-<id>' and can be cut off by
// POST /apps/{id}/users/{user_id}/terminate_connections. Failure (and every sign-in of an
// app with enable_user_authentication: false): pusher:error 4009, close. Watchlists:
// ws/watchlist.ts.

import { ErrorCode } from '../protocol/codes';
import { Ev } from '../protocol/events';
import { errorFrame, frame } from '../protocol/frames';
import { verifyUserAuth } from '../protocol/hmac';
import { SERVER_TO_USER_PREFIX } from '../protocol/channels';
import { topicOf } from '../channels/topic';
import type { WsDeps } from './deps';
import { parseWatchlist } from './watchlist';
import type { Socket, SocketData } from './types';

export function createSignin(deps: WsDeps) {
  function fail(ws: Socket, message: string) {
    ws.cork(() => {
      ws.send(errorFrame(deps.out(Ev.Error), ErrorCode.Unauthorized, message), false);
      ws.end(ErrorCode.Unauthorized, message);
    });
  }

  return function signin(ws: Socket, d: SocketData, data: unknown): void {
    const app = d.app!;
    if (!app.enable_user_authentication) return fail(ws, 'Signin failed: user authentication is disabled for this app');
    const { user_data: userData, auth } = (data ?? {}) as { user_data?: unknown; auth?: unknown };
    if (typeof userData !== 'string') return fail(ws, 'Signin failed: user_data must be a JSON string');
    if (!verifyUserAuth(auth, app.key, app.secret, d.id, userData)) return fail(ws, 'Signin failed: invalid signature');
    let user: unknown;
    try {
      user = JSON.parse(userData);
    } catch {
      return fail(ws, 'Signin failed: user_data is not valid JSON');
    }
    if (user === null || typeof user !== 'object' || Array.isArray(user)) return fail(ws, 'Signin failed: user_data must be a JSON object');
    const id = (user as { id?: unknown }).id;
    if (typeof id !== 'string' || id.length === 0) return fail(ws, 'Signin failed: user_data needs an "id" string');
    if (d.userId !== null && d.userId !== id) return fail(ws, 'Signin failed: this connection is signed in as another user');
    // A bad watchlist is refused even when the app has no watchlist events: the field is the protocol's.
    const watchlist = parseWatchlist(user as Record<string, unknown>);
    if (typeof watchlist === 'string') return fail(ws, `Signin failed: ${watchlist}`);
    d.authBy = 0; // user_authentication_timeout met
    const first = d.userId === null;
    const succeed = (): void => {
      if (d.closed) return;
      ws.send(frame(deps.out(Ev.SigninSuccess), { user_data: userData }), false);
      // After signin_success: the watched users online come in answer to it.
      if (first && app.enable_watchlist_events) deps.watchlists?.signedIn(ws, d, id, watchlist);
    };
    if (!first) return succeed();
    d.userId = id;
    const channel = SERVER_TO_USER_PREFIX + id;
    // interest before the topic: '#server-to-user-<id>' publishes find this shard (channels/interest.ts)
    deps.interest.add(app.id, channel);
    ws.subscribe(topicOf(app.id, channel));
    // in a cluster, signin_success once the channel's bucket is subscribed on the backend
    // (at once when it is), so a user event sent on seeing it reaches this socket from any node
    if (deps.buckets) deps.buckets.after(app.id, channel, succeed);
    else succeed();
  };
}

/** Closes this shard's sockets signed in as `userId` of app `appId` (4009). */
export function terminateUser(sockets: Iterable<Socket>, appId: string, userId: string, out: (e: string) => string): number {
  let n = 0;
  for (const ws of [...sockets]) {
    const d = ws.getUserData();
    if (d.closed || d.app?.id !== appId || d.userId !== userId) continue;
    const message = 'Connection terminated by the server';
    ws.cork(() => {
      ws.send(errorFrame(out(Ev.Error), ErrorCode.Unauthorized, message), false);
      ws.end(ErrorCode.Unauthorized, message);
    });
    n++;
  }
  return n;
}
