// `ringcast drain [--config FILE]`: asks the node of that configuration to drain and stop
// (POST /drain on its metrics listener, with metrics.token), as SIGTERM would.

import http from 'node:http';
import type { Config } from './config/types';

/** Sends POST /drain; resolves with the exit status (0: the node is draining). */
export function drainCommand(config: Config, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const m = config.metrics;
  if (!m.enabled) {
    err('ringcast drain: metrics.enabled is false: POST /drain is served on the metrics listener\n');
    return Promise.resolve(78);
  }
  if (!m.token) {
    err('ringcast drain: metrics.token is empty: the node refuses POST /drain without it\n');
    return Promise.resolve(78);
  }
  // a wildcard bind is reached on the loopback
  const host = m.host === '0.0.0.0' || m.host === '::' ? '127.0.0.1' : m.host;
  return new Promise((resolve) => {
    const req = http.request({ host, port: m.port, path: '/drain', method: 'POST', agent: false, headers: { authorization: `Bearer ${m.token}` }, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => { body += b.toString(); });
      res.on('end', () => {
        if (res.statusCode === 202) {
          out(`ringcast drain: ${host}:${m.port} is draining, then stops\n`);
          return resolve(0);
        }
        err(`ringcast drain: ${host}:${m.port} answered ${res.statusCode}: ${body.trim()}\n`);
        resolve(1);
      });
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', (e) => {
      err(`ringcast drain: could not reach the metrics listener on ${host}:${m.port}: ${e.message}\n`);
      resolve(1);
    });
    req.end();
  });
}
