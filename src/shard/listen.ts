// A shard's listeners: the shared port (SO_REUSEPORT) and, on shard 0 only, the Unix
// socket (listeners/unix.ts says why only it). A Redis rate limiter connects before the
// shard listens (the primary has checked that it answers); should it still not be ready
// in time, listen anyway: limited API requests answer 503 until Redis is reachable (fail
// closed), the rest works. So does the Redis of cache.driver redis: a subscriber must not
// miss an entry for want of a connection; not ready in time, cache channels answer from
// memory until it is.

import uWS, { type us_listen_socket } from 'uWebSockets.js';
import { listenUnix } from '../listeners/unix';
import { STARTUP_TIMEOUT_MS } from '../ratelimit';
import type { ShardContext } from './context';
import type { ShardEvent } from './init';

export interface ShardListeners {
  /** Waits for the backends, then listens; `failed` when the port or the Unix socket cannot be had. */
  start(failed: (final: ShardEvent) => void): void;
  /** Closes every listen socket (a worker thread must not exit with one open). */
  close(): void;
}

export function createListeners(ctx: ShardContext): ShardListeners {
  const { config, init, log, uws } = ctx;
  let listenSocket: us_listen_socket | null = null;
  let unixSocket: us_listen_socket | null = null;
  const close = (): void => {
    for (const ls of [listenSocket, unixSocket]) if (ls) uWS.us_listen_socket_close(ls);
    listenSocket = null;
    unixSocket = null;
  };
  const start = (failed: (final: ShardEvent) => void): void => {
    void Promise.all([
      ctx.limiter.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
        log.error({ err }, 'rate limiter not ready; limited API requests answer 503 until it is');
      }),
      ctx.sharedCache?.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
        log.error({ err }, 'cache Redis not ready; cache channels replay only this node\'s memory until it is');
      }),
      ctx.historyRedis?.ready(STARTUP_TIMEOUT_MS).catch((err: unknown) => {
        log.error({ err }, 'history Redis not ready; publishes to history channels answer 503 until it is');
      }),
    ]).then(() => {
      if (ctx.stopping) return;
      uws.listen(config.host, init.port, (ls) => {
        if (!ls) {
          failed({ type: 'listen_failed', port: init.port });
          return;
        }
        listenSocket = ls;
        if (config.unix_socket.enabled && ctx.shardId === 0) {
          const unix = listenUnix(uws, config.unix_socket);
          if (typeof unix === 'string') {
            log.error({ path: config.unix_socket.path }, unix);
            failed({ type: 'listen_failed', port: init.port });
            return;
          }
          unixSocket = unix;
        }
        ctx.post({ type: 'ready', port: uWS.us_socket_local_port(ls) });
      });
    });
  };
  return { start, close };
}
