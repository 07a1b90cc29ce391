// The primary's /metrics listener (node:http on metrics.host:metrics.port). On each
// scrape it asks every shard for its registry (postMessage on the worker, not the rings),
// sums them with the primary's own registry (AggregatorRegistry.aggregate: counters,
// gauges and histogram buckets are summed per label set) and appends the primary's
// default process metrics (collected in the primary only: CPU and RSS are per process).
// A shard that does not answer within `shardTimeoutMs` is left out (warning logged).
// With a token (metrics.token), a scrape without `Authorization: Bearer <token>` is
// answered 401 before anything is collected; the token is compared in constant time (of
// SHA-256 digests, so its length does not show either).

import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { AggregatorRegistry, Registry, collectDefaultMetrics } from 'prom-client';
import { listenHttp } from '../listeners/http';
import type { MetricsJson, PromMetrics } from './registry';

export interface MetricsServer {
  /** The bound port (metrics.port 0 = an ephemeral one). */
  readonly port: number;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  host: string;
  port: number;
  prefix: string;
  log: Logger;
  /** The primary's own registry (shard_restarts_total, …). */
  primary: PromMetrics;
  /** The shard threads of this moment (shard ids are their indexes). */
  shards: () => readonly Worker[];
  shardTimeoutMs?: number;
  /** metrics.token: '' = no token. */
  token?: string;
  /** POST /drain (with the token): the node drains and stops, as on SIGTERM. */
  onDrain?: () => void;
}

/**
 * The scrape request posted to a shard, and its answer. They are members of
 * shard/init.ts's PrimaryCommand and ShardEvent, written out here because nothing outside
 * the wiring imports shard/ (a type check in test/metrics/metrics.test.ts keeps them equal).
 */
export interface MetricsRequest { type: 'metrics'; req: number }
export interface MetricsReply { type: 'metrics'; req: number; metrics: MetricsJson }

let nextReq = 1;

/** One shard's metrics, or null when it did not answer in time (or is gone). */
function askShard(worker: Worker, shard: number, timeoutMs: number, log: Logger): Promise<MetricsJson | null> {
  const req = nextReq++;
  return new Promise((resolve) => {
    // Every message the shard posts arrives here; only the answer to this request counts.
    const onMessage = (e: { type: string; req?: number }) => {
      if (e.type !== 'metrics' || e.req !== req) return;
      finish((e as MetricsReply).metrics);
    };
    const timer = setTimeout(() => {
      log.warn({ shard, timeoutMs }, 'shard did not answer the metrics request in time; scrape served without it');
      finish(null);
    }, timeoutMs);
    function finish(m: MetricsJson | null) {
      clearTimeout(timer);
      worker.off('message', onMessage);
      resolve(m);
    }
    worker.on('message', onMessage);
    try {
      const cmd: MetricsRequest = { type: 'metrics', req };
      worker.postMessage(cmd);
    } catch (err) {
      log.warn({ err, shard }, 'could not ask a shard for its metrics');
      finish(null);
    }
  });
}

/** The aggregated Prometheus text of every thread plus the primary's process metrics. */
export async function scrape(opts: MetricsServerOptions, defaults: Registry): Promise<string> {
  const timeoutMs = opts.shardTimeoutMs ?? 1000;
  const shards = opts.shards();
  const [own, ...parts] = await Promise.all([
    opts.primary.json(),
    ...shards.map((w, i) => askShard(w, i, timeoutMs, opts.log)),
  ]);
  const all = [own, ...parts.filter((p): p is MetricsJson => p !== null)];
  const aggregated = AggregatorRegistry.aggregate(all);
  return (await aggregated.metrics()) + (await defaults.metrics());
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Why `authorization` does not carry the bearer `token`, or null when it does. */
export function bearerRefusal(authorization: string | undefined, token: string): string | null {
  if (authorization === undefined || authorization === '') return 'missing Authorization header: /metrics needs `Authorization: Bearer <metrics.token>`';
  const m = /^Bearer +(.+)$/i.exec(authorization);
  if (!m) return 'Authorization header is not `Bearer <token>`';
  return timingSafeEqual(sha256(m[1]), sha256(token)) ? null : 'wrong bearer token for /metrics';
}

const TEXT = { 'content-type': 'text/plain; charset=utf-8' };

/**
 * POST /drain: an operator's stop of this node (the paced drain, then the stop, as on SIGTERM).
 * Only with metrics.token set, and with it as the bearer token: a scrape-only setup without a
 * token must not let anyone who reaches the port stop the node.
 */
function drain(opts: MetricsServerOptions, req: http.IncomingMessage, res: http.ServerResponse, onDrain: () => void): void {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST', ...TEXT }).end('Method not allowed: POST /drain\n');
    return;
  }
  if (!opts.token) {
    res.writeHead(403, TEXT).end('Forbidden: POST /drain needs metrics.token set, and `Authorization: Bearer <metrics.token>`\n');
    return;
  }
  const refusal = bearerRefusal(req.headers.authorization, opts.token);
  if (refusal !== null) {
    res.writeHead(401, { 'www-authenticate': 'Bearer realm="metrics"', ...TEXT }).end(`Unauthorized: ${refusal.replace('/metrics', '/drain')}\n`);
    return;
  }
  opts.log.info('drain asked over HTTP (POST /drain): draining, then stopping');
  res.writeHead(202, { 'content-type': 'application/json', connection: 'close' }).end('{"status":"draining"}\n');
  onDrain();
}

export function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const defaults = new Registry();
  collectDefaultMetrics({ register: defaults, prefix: opts.prefix });
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === '/drain' && opts.onDrain) return drain(opts, req, res, opts.onDrain);
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('Method not allowed\n');
      return;
    }
    const refusal = opts.token ? bearerRefusal(req.headers.authorization, opts.token) : null;
    if (refusal !== null) {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="metrics"', 'content-type': 'text/plain; charset=utf-8' }).end(`Unauthorized: ${refusal}\n`);
      return;
    }
    scrape(opts, defaults).then((text) => {
      res.writeHead(200, { 'content-type': Registry.PROMETHEUS_CONTENT_TYPE }).end(req.method === 'HEAD' ? undefined : text);
    }, (err: unknown) => {
      opts.log.error({ err }, 'metrics scrape failed');
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics scrape failed\n');
    });
  });
  return listenHttp(server, opts.port, opts.host, { onError: (err) => opts.log.error({ err }, 'metrics listener error') });
}
