// unix_socket.*: the server also listens on a Unix domain socket (behind a local reverse
// proxy such as nginx, or for clients on the same host), with the same routes as the
// TCP port: WebSocket /app/<key>, the HTTP API, /up.
//
// One path can hold one listener, and SO_REUSEPORT has no Unix-socket counterpart, so the
// shards cannot each listen on it as they do on the TCP port. Shard 0 alone listens on the
// socket (its replacement does again after a crash); the other shards still own their
// share of the channels and deliver to their own TCP clients. docs/architecture.md
// ("Unix socket") gives the measurements behind this choice.
//
// The primary checks the path before the shards start (prepareUnixSocket): uWS's
// listen_unix unlinks whatever is at the path before it binds, which would silently take
// the socket of another running server, or delete a regular file that happens to be there.

import { chmodSync, existsSync, lstatSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import uWS, { type TemplatedApp, type us_listen_socket } from 'uWebSockets.js';
import type { Config } from '../config/types';

type UnixConfig = Config['unix_socket'];

/** Does something accept connections on the socket at `path`? */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ path });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/**
 * Before listening: a stale socket file (nothing answers on it) is removed; a live one, or
 * a path that is not a socket, is an error (returned as its message).
 */
export async function prepareUnixSocket(cfg: UnixConfig): Promise<string | null> {
  let st;
  try {
    st = lstatSync(cfg.path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      const dir = path.dirname(cfg.path);
      return existsSync(dir) ? null : `unix_socket.path ${cfg.path}: the directory ${dir} does not exist`;
    }
    return `cannot inspect unix_socket.path ${cfg.path}: ${(err as Error).message}`;
  }
  if (!st.isSocket()) return `unix_socket.path ${cfg.path} exists and is not a socket; not removing it`;
  if (await answers(cfg.path)) return `unix_socket.path ${cfg.path} is in use by a running server`;
  try {
    unlinkSync(cfg.path);
  } catch (err) {
    return `cannot remove the stale socket ${cfg.path}: ${(err as Error).message}`;
  }
  return null;
}

/** Shard side: listens on the socket and applies permission_mode. The listen socket, or an error message. */
export function listenUnix(app: TemplatedApp, cfg: UnixConfig): us_listen_socket | string {
  let listen: us_listen_socket | false = false;
  // uWS calls back synchronously, with false when it cannot bind.
  app.listen_unix((ls) => { listen = ls; }, cfg.path);
  if (!listen) return `could not listen on the Unix socket ${cfg.path}`;
  try {
    chmodSync(cfg.path, cfg.permission_mode);
  } catch (err) {
    uWS.us_listen_socket_close(listen);
    return `could not apply unix_socket.permission_mode to ${cfg.path}: ${(err as Error).message}`;
  }
  return listen;
}

/** At stop, once the listener is closed: the socket file goes (uWS leaves it behind). */
export function removeUnixSocket(cfg: UnixConfig): void {
  try {
    if (lstatSync(cfg.path).isSocket()) unlinkSync(cfg.path);
  } catch {
    // already gone
  }
}
