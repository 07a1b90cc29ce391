// Checks both fuzz files run after the fuzz: plain JSON GETs and the live shard prefixes.

import http from 'node:http';
import { RawClient, type TestServer } from '../helpers/server';

export function getJson(port: number, path: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode!, body: JSON.parse(text) });
        } catch {
          resolve({ status: res.statusCode!, body: text });
        }
      });
    }).on('error', reject);
  });
}

/** Socket-id prefixes of `n` fresh connections: one per live shard (a restarted shard has a new one). */
export async function livePrefixes(srv: TestServer, n: number): Promise<Set<string>> {
  const clients = await Promise.all(Array.from({ length: n }, () => RawClient.connect(srv.wsUrl())));
  const prefixes = new Set(clients.map((c) => c.socketId.split('.')[0]));
  await Promise.all(clients.map((c) => c.close()));
  return prefixes;
}
