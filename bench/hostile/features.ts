// Hostile clients against the features (history, hooks, idempotency, per-address limits),
// from outside, against ringcast from this checkout's build in its own process (so that
// RSS and the log are the server's alone), with the public app key only unless said:
//
//   1. history metadata: 8 sockets subscribing to random `history-*` names (rewind 5) and
//      leaving them, for --seconds; RSS kept after every socket closed (≤ 64 MiB), and with
//      history.driver redis the keys left in Redis (0: nothing is stored for a name that
//      never had a message);
//   2. replay amplification: a channel holding 1,000 × 50 KiB, 4 sockets subscribing and
//      unsubscribing with `recover` from serial 0 for --seconds; meanwhile an idle socket on
//      every shard pings (p99 ≤ 200 ms), API publishes to another channel answer 200 (p99
//      ≤ 200 ms), and the log grows by at most a few thousand lines;
//   3. a client event nested 16,500 levels deep on a private channel with a client_event
//      hook (the channel's auth signed as the app's auth endpoint would): a pusher:error,
//      the socket and the shard live on (no "shard crashed" in the log);
//   6. limits.max_connections_per_ip (200 here): from 127.0.0.3 the 201st connection is
//      refused, while 127.0.0.4 still connects;
//   7. one idempotency key on /events then in /batch_events, and the reverse: a 4xx, never
//      500, and the batch's other keys never left "still being answered".
// (4 and 5, the HTTP fallback session bound to its address and hooks seeing it, are checked
// in the suite: test/fallback/, test/hooks/.)
//
//   make build && node dist/bench/hostile/features.js [--workers N] [--seconds S]
//
// Exit status 0 only if every check held.

import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Pusher from 'pusher';
import WebSocket from 'ws';
import { startHookBackend } from '../../test/helpers/hook-backend';
import { redisCommand, RedisServer } from '../../test/helpers/redis';
import { killAllNow } from '../harness/procs';
import { APP, freePort, rssKb, type RunningTarget } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

const MiB = 1024 * 1024;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  if (i === -1) return dflt;
  const n = Number(process.argv[i + 1]);
  if (!(n > 0)) throw new Error(`${name} must be a positive number`);
  return n;
}

/** A WebSocket message as text (ws gives a Buffer, or a list of them when fragmented). */
const text = (m: WebSocket.RawData): string => (Array.isArray(m) ? Buffer.concat(m) : Buffer.from(m as ArrayBuffer)).toString('utf8');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const p99 = (xs: number[]) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]);

interface Conn { ws: WebSocket; socketId: string; frames: Record<string, unknown>[]; closed: number | null }

function connect(port: number, localAddress = '127.0.0.1'): Promise<Conn> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`, { localAddress });
  const c: Conn = { ws, socketId: '', frames: [], closed: null };
  ws.on('close', (code) => { c.closed = code; });
  return new Promise((resolve, reject) => {
    ws.once('message', (raw) => {
      const f = JSON.parse(text(raw)) as { event: string; data: string };
      if (f.event !== 'pusher:connection_established') return reject(new Error(`refused: ${text(raw)}`));
      c.socketId = (JSON.parse(f.data) as { socket_id: string }).socket_id;
      ws.on('message', (m) => { if (c.frames.length < 1000) c.frames.push(JSON.parse(text(m)) as Record<string, unknown>); });
      resolve(c);
    });
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`closed ${code} before connection_established`)));
  });
}

/** Pings on `c` every `everyMs` until stop(); the round trips (ms). */
function pinger(c: Conn, everyMs: number): { stop(): Promise<number[]> } {
  const rtts: number[] = [];
  let on = true;
  const loop = (async () => {
    while (on && c.ws.readyState === WebSocket.OPEN) {
      const at = performance.now();
      const pong = new Promise<void>((resolve) => {
        const h = (m: WebSocket.RawData) => { if (text(m).includes('pusher:pong')) { c.ws.off('message', h); resolve(); } };
        c.ws.on('message', h);
      });
      c.ws.send('{"event":"pusher:ping","data":{}}');
      await pong;
      rtts.push(performance.now() - at);
      await sleep(everyMs);
    }
  })();
  return { stop: async () => { on = false; await loop; return rtts; } };
}

async function main(): Promise<number> {
  const workers = arg('--workers', 4);
  const seconds = arg('--seconds', 20);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-hostile-features-'));
  const hooks = await startHookBackend();
  const redis = await RedisServer.start();
  const appYaml = [
    'max_event_payload_in_kb: 64',
    'enable_client_messages: true',
    'channel_history: {"history-*": {size: 100, ttl: 600, rewind: 5}, "big-*": {size: 1000, ttl: 600}}',
    `hooks: {url: "${hooks.url}", timeout_ms: 2000, on_failure: deny, client_event: {enabled: true}}`,
  ];
  const env = { LIMITS_MAX_CONNECTIONS_PER_IP: '200' };
  let failed = 0;
  const results: Record<string, unknown>[] = [];
  const check = (ok: boolean, what: string) => {
    if (!ok) failed++;
    console.log(`${ok ? 'ok    ' : 'FAILED'} ${what}`);
  };
  const start = async (yaml: string[] = []): Promise<{ server: RunningTarget; port: number; log: string }> => {
    const port = await freePort();
    const server = await ringcastTarget(workers, { yaml: yaml.length > 0 ? yaml : ['history: {memory_budget_mb: 256}'], appYaml, env }).start({ port, tmpDir: tmp });
    return { server, port, log: path.join(tmp, `ringcast-${workers}-${port}.log`) };
  };
  const logLines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').length - 1 : 0);
  const sdkOf = (port: number) => new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(port), useTLS: false });
  console.log(`ringcast workers:${workers}, host ${os.cpus().length} cores, node ${process.version}, ${seconds} s per attack`);

  try {
    // ---- 1. history metadata ------------------------------------------------------------
    for (const driver of ['memory', 'redis'] as const) {
      const { server, port } = await start(driver === 'redis' ? [`history: {driver: redis, memory_budget_mb: 256}`, `database: {redis: {host: 127.0.0.1, port: ${redis.port}}}`] : []);
      try {
        await sleep(500);
        const before = rssKb(server.pid) * 1024;
        let names = 0;
        let closes = 0;
        const until = Date.now() + (driver === 'memory' ? seconds : Math.min(seconds, 5)) * 1000;
        // each socket at its frame rate's limit (limits: 1,000 frames/s), reconnecting when closed
        await Promise.all(Array.from({ length: 8 }, async () => {
          while (Date.now() < until) {
            const c = await connect(port);
            while (Date.now() < until && c.ws.readyState === WebSocket.OPEN) {
              const batch = Array.from({ length: 25 }, () => `history-${crypto.randomBytes(8).toString('hex')}`);
              for (const channel of batch) c.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
              for (const channel of batch) c.ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel } }));
              names += batch.length;
              await sleep(50);
            }
            if (c.closed !== null) closes++;
            c.ws.close();
          }
        }));
        await sleep(2000);
        const kept = rssKb(server.pid) * 1024 - before;
        const keys = driver === 'redis' ? Number((await redisCommand(redis.port, 'DBSIZE')).replace(/[^0-9]/g, '')) : null;
        results.push({ attack: 1, driver, names, closes, rss_kept_mib: +(kept / MiB).toFixed(1), redis_keys: keys });
        console.log(`  1. history metadata (${driver}): ${names} names in ${driver === 'memory' ? seconds : Math.min(seconds, 5)} s (sockets closed by the server ${closes}), RSS kept ${(kept / MiB).toFixed(1)} MiB${keys === null ? '' : `, Redis keys ${keys}`}`);
        check(kept <= 64 * MiB, `1. (${driver}) RSS kept ${(kept / MiB).toFixed(1)} MiB ≤ 64`);
        if (keys !== null) check(keys === 0, `1. (redis) no key for names that never had a message (${keys})`);
      } finally {
        await server.stop();
      }
    }

    // ---- the server for 2, 3, 6, 7 -----------------------------------------------------------
    const { server, port, log } = await start();
    const sdk = sdkOf(port);
    try {
      // ---- 2. replay amplification ------------------------------------------------------------
      const big = 'x'.repeat(50 * 1024);
      for (let i = 0; i < 1000; i += 10) {
        await sdk.triggerBatch(Array.from({ length: 10 }, (_, k) => ({ channel: 'big-1', name: 'ev', data: JSON.stringify({ i: i + k, big }) })));
      }
      const probe = await connect(port);
      probe.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'big-1', recover: {} } }));
      while (!probe.frames.some((f) => f.event === 'pusher_internal:recovery')) await sleep(20);
      const epoch = (probe.frames.find((f) => f.event === 'pusher_internal:recovery')!.data as { epoch: string }).epoch;
      probe.ws.close();
      // an idle socket on every shard (socket ids are <shard prefix>.<n>)
      const idle: Conn[] = [];
      const shards = new Set<string>();
      for (let i = 0; i < 200 && shards.size < workers; i++) {
        const c = await connect(port);
        const shard = c.socketId.split('.')[0];
        if (shards.has(shard)) c.ws.close();
        else { shards.add(shard); idle.push(c); }
      }
      const attackers = await Promise.all(Array.from({ length: 4 }, () => connect(port)));
      for (const a of attackers) a.ws.on('message', () => undefined); // never parsed (raw: the frames array keeps 1,000)
      const linesBefore = logLines(log);
      const pingers = idle.map((c) => pinger(c, 50));
      const until = Date.now() + seconds * 1000;
      // each attacker at its frame rate's limit (1,000 frames/s); one the server closed comes back
      let reconnects = 0;
      const churn = setInterval(() => {
        attackers.forEach((a, n) => {
          if (a.closed !== null && a.closed !== -1 && a.ws.readyState === WebSocket.CLOSED) {
            attackers[n] = { ...a, closed: -1 };
            reconnects++;
            void connect(port).then((c) => { attackers[n] = c; }, () => undefined);
            return;
          }
          if (a.ws.readyState !== WebSocket.OPEN) return;
          for (let i = 0; i < 5; i++) {
            a.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'big-1', recover: { epoch, serial: 0 } } }));
            a.ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel: 'big-1' } }));
          }
        });
      }, 10);
      const publishes: number[] = [];
      let non200 = 0;
      while (Date.now() < until) {
        const at = performance.now();
        try {
          await sdk.trigger('elsewhere', 'ev', { at });
        } catch {
          non200++;
        }
        publishes.push(performance.now() - at);
        await sleep(20);
      }
      clearInterval(churn);
      const rtts = (await Promise.all(pingers.map((p) => p.stop()))).flat();
      const closedAttackers = reconnects;
      for (const a of attackers) a.ws.terminate();
      const grew = logLines(log) - linesBefore;
      results.push({ attack: 2, idle_shards: idle.length, ping_p99_ms: +p99(rtts).toFixed(1), pings: rtts.length, publish_p99_ms: +p99(publishes).toFixed(1), publishes: publishes.length, non200, log_lines: grew, attackers_closed: closedAttackers });
      console.log(`  2. replay churn: ${idle.length} idle sockets (one per shard) ping p99 ${p99(rtts).toFixed(1)} ms over ${rtts.length}; API publish p99 ${p99(publishes).toFixed(1)} ms over ${publishes.length} (${non200} not 200); log +${grew} lines; attackers closed by the server (and back) ${closedAttackers} times`);
      check(p99(rtts) <= 200, `2. idle sockets' ping p99 ${p99(rtts).toFixed(1)} ms ≤ 200`);
      check(p99(publishes) <= 200 && non200 === 0, `2. API publishes elsewhere all 200, p99 ${p99(publishes).toFixed(1)} ms ≤ 200`);
      check(grew <= 3000, `2. the log grew by ${grew} lines (≤ 3,000)`);
      check(idle.every((c) => c.closed === null), '2. the idle sockets are still connected');

      // ---- 3. a deep client event with a client_event hook ---------------------------------
      const victim = await connect(port);
      const deep = await connect(port);
      const channel = 'private-deep';
      const auth = (c: Conn) => `${APP.key}:${crypto.createHmac('sha256', APP.secret).update(`${c.socketId}:${channel}`).digest('hex')}`;
      for (const c of [victim, deep]) c.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, auth: auth(c) } }));
      while (![victim, deep].every((c) => c.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'))) await sleep(20);
      const nested = '['.repeat(16_500) + ']'.repeat(16_500);
      deep.ws.send(`{"event":"client-deep","channel":"${channel}","data":${nested}}`);
      deep.ws.send('{"event":"pusher:ping","data":{}}');
      while (deep.closed === null && !deep.frames.some((f) => f.event === 'pusher:pong')) await sleep(20);
      const err = deep.frames.find((f) => f.event === 'pusher:error');
      const crashed = fs.readFileSync(log, 'utf8').includes('shard crashed');
      results.push({ attack: 3, error: err?.data ?? null, sender_open: deep.closed === null, victim_open: victim.closed === null, shard_crashed: crashed, hook_calls: hooks.calls.length });
      console.log(`  3. 16,500-deep client event: ${JSON.stringify(err?.data ?? null)}; sender open ${deep.closed === null}, other socket open ${victim.closed === null}, shard crashed ${crashed}`);
      check(err !== undefined && deep.closed === null && victim.closed === null && !crashed, '3. a clear pusher:error, no shard crash, both sockets open');
      for (const c of [victim, deep]) c.ws.close();

      // ---- 6. per-address cap ----------------------------------------------------------------
      const held: Conn[] = [];
      let refusedAt = -1;
      let refusal = '';
      for (let i = 0; i < 220 && refusedAt === -1; i++) {
        try {
          held.push(await connect(port, '127.0.0.3'));
        } catch (e) {
          refusedAt = i;
          refusal = (e as Error).message;
        }
      }
      const other = await connect(port, '127.0.0.4').then((c) => { c.ws.close(); return true; }, () => false);
      for (const c of held) c.ws.close();
      results.push({ attack: 6, held: held.length, refused_at: refusedAt, refusal, other_address_connects: other });
      console.log(`  6. one address: ${held.length} held, refused at #${refusedAt + 1}: ${refusal.slice(0, 160)}; another address connects: ${other}`);
      check(held.length === 200 && refusedAt === 200 && other, '6. the cap (200 here) holds for one address while another connects');

      // ---- 7. idempotency across routes ---------------------------------------------------------
      const statuses: number[] = [];
      const post = async (p: string, body: unknown): Promise<number> => {
        const r = await sdk.post({ path: p, body: body as string }).then((x) => x.status, (e: { status?: number }) => e.status ?? 0);
        statuses.push(r);
        return r;
      };
      const k = () => `k-${crypto.randomBytes(6).toString('hex')}`;
      const [k1, k2, k3, k4] = [k(), k(), k(), k()];
      const a1 = await post('/events', { name: 'ev', channels: ['idem'], data: '1', idempotency_key: k1 });
      const a2 = await post('/batch_events', { batch: [{ name: 'ev', channel: 'idem', data: '2', idempotency_key: k2 }, { name: 'ev', channel: 'idem', data: '3', idempotency_key: k1 }] });
      const a3 = await post('/events', { name: 'ev', channels: ['idem'], data: '4', idempotency_key: k2 });
      const a4 = await post('/batch_events', { batch: [{ name: 'ev', channel: 'idem', data: '5', idempotency_key: k3 }] });
      const a5 = await post('/events', { name: 'ev', channels: ['idem'], data: '6', idempotency_key: k3 });
      const a6 = await post('/events', { name: 'ev', channels: ['idem'], data: '7', idempotency_key: k4 });
      results.push({ attack: 7, statuses: [a1, a2, a3, a4, a5, a6] });
      console.log(`  7. idempotency keys across routes: /events ${a1}, batch reusing it ${a2}, its other key on /events ${a3}, batch ${a4}, its key on /events ${a5}, a fresh key ${a6}`);
      check(statuses.every((s) => s !== 500 && s !== 503), '7. never 500, never "still being answered"');
      check(a1 === 200 && a2 >= 400 && a2 < 500 && a4 === 200 && a5 >= 400 && a5 < 500 && a6 === 200, '7. a key reused on the other route: a clear 4xx');
    } finally {
      await server.stop();
    }
  } finally {
    await hooks.close();
    await redis.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  for (const r of results) console.log(JSON.stringify(r));
  console.log(failed === 0 ? 'all checks passed' : `${failed} check(s) failed`);
  return failed === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  killAllNow();
  process.exit(2);
});
