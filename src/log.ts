// Logging: pino in every thread, one destination per process.
//
// Every thread logs through pino, but only the primary writes: a shard's logger serializes
// its line (pino's JSON, on the shard) and posts it over its own MessagePort (created by
// primary/spawn.ts); the primary writes each line whole to the process's one destination.
// So lines of different threads never interleave, whatever their size (several threads
// writing to fd 1 themselves are only atomic up to PIPE_BUF), and a shard never formats
// human-readable text or waits on stdout.
//
// The destination: `json` (default) writes the JSON lines to stdout synchronously from
// the primary; `human` hands them to one pino-pretty transport (its own thread, pino's
// transport machinery), which formats them, in colour when log.colors_enabled.
// log.include_target adds `thread` (primary, shard-N) and `module` (main, ws, http, bus...)
// to every line, and the human format shows them as a `[shard-2 ws]` prefix.

import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config/types';

type LogConfig = Config['log'];

const destinations = new Map<string, DestinationStream>();

/** pino-pretty's template with log.include_target: `[thread module] message`. */
const TARGET_FORMAT = '[{thread}{if module} {module}{end}] {msg}';

/** The process's one log destination for this format (created once, then shared). */
export function logDestination(cfg: LogConfig): DestinationStream {
  const key = cfg.output_format === 'human' ? `human:${cfg.colors_enabled}:${cfg.include_target}` : 'json';
  let dest = destinations.get(key);
  if (!dest) {
    dest = cfg.output_format === 'human'
      ? pino.transport({
        target: 'pino-pretty',
        options: {
          colorize: cfg.colors_enabled,
          translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l',
          ignore: 'pid,hostname,thread,module',
          messageFormat: cfg.include_target ? TARGET_FORMAT : '{msg}',
          singleLine: true,
          // stdout of the transport's own thread; pino flushes it when the process exits.
          destination: 1,
        },
      })
      : pino.destination({ dest: 1, sync: true });
    destinations.set(key, dest);
  }
  return dest;
}

function options(cfg: LogConfig, thread: string, bindings: Record<string, unknown>): pino.LoggerOptions {
  return {
    level: cfg.level,
    base: { pid: process.pid, ...(cfg.include_target ? { thread } : {}), ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

/** The logger of the primary thread (or of a tool), writing to the process destination. */
export function createLogger(cfg: LogConfig, bindings: Record<string, unknown> = {}, thread = 'primary'): Logger {
  return pino(options(cfg, thread, bindings), logDestination(cfg));
}

/** A shard's logger: its lines go to the primary over `port` (see relayLogs). */
export function createShardLogger(cfg: LogConfig, port: MessagePort, shardId: number): Logger {
  const stream = { write: (line: string) => port.postMessage(line) };
  return pino(options(cfg, `shard-${shardId}`, { shard: shardId }), stream);
}

/**
 * Primary side of a shard's log port: every line it posts goes, whole, to the process
 * destination. Call the returned drain when the thread has exited: lines it posted last
 * may still wait in the port (the `exit` event does not wait for them); they are written,
 * in order, before anyone awaiting the exit goes on.
 */
export function relayLogs(cfg: LogConfig, port: MessagePort): () => void {
  const dest = logDestination(cfg);
  port.on('message', (line: string) => dest.write(line));
  return () => {
    for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) dest.write(m.message as string);
    port.close();
  };
}

/** `log` for one module of the code: tagged with `module` when log.include_target is on. */
export function moduleLogger(log: Logger, cfg: LogConfig, module: string): Logger {
  return cfg.include_target ? log.child({ module }) : log;
}

/** At most one line per message per this many ms (logLimited). */
export const LOG_LIMIT_INTERVAL_MS = 1000;

interface LimitState { shownAt: number; suppressed: number; last: Record<string, unknown>; timer: NodeJS.Timeout | null }

const limited = new WeakMap<Logger, Map<string, LimitState>>();

/**
 * A line that a storm could repeat once per item (a notice dropped on a full queue): at
 * most one per `msg`, app and logger each LOG_LIMIT_INTERVAL_MS (the app: the line's
 * `app_id`, else `app`; so one app's storm does not hide another app's lines). The lines in between are
 * counted, not written; when the interval ends with some counted, one more line (the same
 * message) is written with the last one's fields and `suppressed: <count>`, so the lines' counts add
 * up to every occurrence. The metric that counts the item (bus_full_total, …) stays exact.
 */
export function logLimited(log: Logger, level: 'warn' | 'error', obj: Record<string, unknown>, msg: string): void {
  let byMsg = limited.get(log);
  if (!byMsg) limited.set(log, byMsg = new Map<string, LimitState>());
  const now = Date.now();
  const app = obj.app_id ?? obj.app;
  const key = typeof app === 'string' ? msg + '\0' + app : msg;
  const s = byMsg.get(key);
  if (!s || (s.timer === null && now - s.shownAt >= LOG_LIMIT_INTERVAL_MS)) {
    byMsg.set(key, { shownAt: now, suppressed: 0, last: obj, timer: null });
    log[level](obj, msg);
    return;
  }
  s.suppressed++;
  s.last = obj;
  if (s.timer !== null) return;
  const flush = () => {
    s.timer = null;
    if (s.suppressed === 0) return;
    const n = s.suppressed;
    s.suppressed = 0;
    s.shownAt = Date.now();
    log[level]({ ...s.last, suppressed: n }, msg);
  };
  s.timer = setTimeout(flush, Math.max(0, s.shownAt + LOG_LIMIT_INTERVAL_MS - now));
  s.timer.unref();
}
