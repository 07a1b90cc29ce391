// Helpers of the fault tests: signed API publishes on a chosen HTTP agent (with status
// and body, never throwing on 4xx/5xx), /metrics counters, and RSS sampling.

import http from 'node:http';
import type { Socket } from 'node:net';
import { ownerOf } from '../../src/channels/owner';
import { signApiQuery } from '../../src/protocol/api-auth';
import { readResponse } from '../helpers/http';
import { APP } from '../helpers/server';

export interface ApiResponse {
  status: number;
  json: any;
  text: string;
  socket: import('node:net').Socket | null;
}

/** POST /apps/{id}/{events|batch_events} signed like the pusher SDK. */
export function publish(
  port: number, body: unknown, opts: { agent?: http.Agent | false; batch?: boolean; timeoutMs?: number } = {},
): Promise<ApiResponse> {
  const raw = JSON.stringify(body);
  const path = `/apps/${APP.id}/${opts.batch ? 'batch_events' : 'events'}`;
  const query = signApiQuery(APP.key, APP.secret, 'POST', path, {}, raw, Math.floor(Date.now() / 1000));
  return request(port, 'POST', `${path}?${query}`, raw, opts.agent ?? false, opts.timeoutMs ?? 10_000);
}

/** A signed GET of /apps/{id}/{sub}?{params}. */
export function signedGet(
  port: number, sub: string, opts: { agent?: http.Agent | false; timeoutMs?: number; params?: Record<string, string> } = {},
): Promise<ApiResponse> {
  const path = `/apps/${APP.id}/${sub}`;
  const query = signApiQuery(APP.key, APP.secret, 'GET', path, opts.params ?? {}, '', Math.floor(Date.now() / 1000));
  return request(port, 'GET', `${path}?${query}`, '', opts.agent ?? false, opts.timeoutMs ?? 10_000);
}

function request(port: number, method: string, pathAndQuery: string, body: string, agent: http.Agent | false, timeoutMs: number): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method, path: pathAndQuery, agent,
      headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
    }, (res) => {
      readResponse(res).then(({ status, json, text }) => resolve({ status, json, text, socket: req.socket ?? null }), reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${pathAndQuery.split('?')[0]} timed out`)));
    req.end(body);
  });
}

/** Sum of the /metrics series `prefix` + `name` whose labels include `labels`; 0 when absent. */
export async function metric(metricsPort: number, name: string, labels: Record<string, string> = {}, prefix = 'ringcast_'): Promise<number> {
  const text = await new Promise<string>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: metricsPort, path: '/metrics', agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    }).on('error', reject);
  });
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== prefix + name) continue;
    const got: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) got[l[1]] = l[2];
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** Samples process RSS every `everyMs` until stop(); `max` is the highest seen. */
export function rssSampler(everyMs = 50): { readonly max: number; stop(): number } {
  let max = process.memoryUsage().rss;
  const timer = setInterval(() => { max = Math.max(max, process.memoryUsage().rss); }, everyMs);
  return {
    get max() { return max; },
    stop() {
      clearInterval(timer);
      max = Math.max(max, process.memoryUsage().rss);
      return max;
    },
  };
}

export const MiB = 1024 * 1024;

/**
 * A keep-alive API connection (agent and socket) on a shard that drains its rings while
 * others are stalled (testPauseBus): a question about a channel owned by shard 0 is
 * answered at once there and on every shard that reads, not on a stalled one (whose reply
 * ring it does not read). Null when none was found in 50 tries.
 */
export async function drainingConnection(port: number, shards: number): Promise<{ agent: http.Agent; conn: Socket } | null> {
  const probe = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((x) => `probe-${x}`).find((c) => ownerOf(APP.id, c, shards) === 0)!;
  for (let i = 0; i < 50; i++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const r = await signedGet(port, `channels/${probe}`, { agent, timeoutMs: 300 }).catch(() => null);
    if (r?.status === 200 && r.socket) return { agent, conn: r.socket };
    agent.destroy();
  }
  return null;
}
