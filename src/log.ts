import pino, { type Logger } from 'pino';
import type { Config } from './config/types';

/** One logger per thread; JSON lines on stdout (pino). */
export function createLogger(cfg: Config['log'], bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level: cfg.level,
    base: { pid: process.pid, ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
