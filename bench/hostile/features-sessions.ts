// Attacks 3 to 7 of bench/hostile/features.ts: a deep client event through a hook, HTTP
// session takeover, addresses in hooks, the per-address cap, idempotency across routes.

import fs from 'node:fs';
import type { HookBackend } from '../../test/helpers/hook-backend';
import { RawReceive } from '../../test/helpers/fallback';
import type { RunningTarget } from '../harness/target';
import { APP } from '../harness/target';
import type { Result } from './features-history';
import { api, channelAuth, post, sleep, Sock, type Answer } from './features-util';

const UA = 'hostile-features/1.0';
const ORIGIN = 'https://victim.example';
let seq = 0;
const sid = () => `${process.pid.toString(32)}${(++seq).toString(32)}`.padStart(8, '0').slice(-8);
const base = (id: string) => `/pusher/app/${APP.key}/123/${id}`;
const xhrSend = (port: number, id: string, frames: unknown[], from: string, ua = UA) =>
  post(port, `${base(id)}/xhr_send?t=1&n=1`, JSON.stringify(frames.map((f) => JSON.stringify(f))), from, { 'user-agent': ua });

async function waitFor(pred: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > until) return false;
    await sleep(20);
  }
  return true;
}

/** An HTTP streaming session opened from `from`; null if it got no connection_established. */
async function session(port: number, from: string, id = sid()): Promise<{ r: RawReceive; id: string } | null> {
  const r = new RawReceive(port, `${base(id)}/xhr_streaming?t=1&n=1`, { 'user-agent': UA, origin: ORIGIN }, from);
  const ok = await waitFor(() => r.ended || r.status >= 400 || r.frames().some((f) => f.event === 'pusher:connection_established'), 5000);
  return ok && r.status === 200 && !r.ended ? { r, id } : (r.abort(), null);
}

/** 3. A client event nesting 16,500 levels on a private channel with a client_event hook. */
export async function deepClientEvent(server: RunningTarget, backend: HookBackend): Promise<Result> {
  const a = await Sock.open(server.port);
  const b = await Sock.open(server.port);
  const others = await Promise.all(Array.from({ length: 8 }, () => Sock.open(server.port)));
  for (const c of [a, b]) {
    c.send({ event: 'pusher:subscribe', data: { channel: 'private-deep', auth: channelAuth(c.socketId, 'private-deep') } });
    await c.next((f) => f.event === 'pusher_internal:subscription_succeeded', 5000, 'subscription_succeeded', 0);
  }
  const callsBefore = backend.calls.length;
  const depth = 16_500;
  const from = a.frames.length;
  a.send(`{"event":"client-deep","channel":"private-deep","data":${'['.repeat(depth)}${']'.repeat(depth)}}`);
  const err = await a.next((f) => f.event === 'pusher:error', 5000, 'pusher:error', from).catch(() => null);
  // the positive marker: a shallow event goes through the hook to the other subscriber
  a.send({ event: 'client-ok', channel: 'private-deep', data: { n: 1 } });
  const through = await b.next((f) => f.event === 'client-ok', 5000, 'client-ok', 0).then(() => true, () => false);
  const pingMs = await a.ping().catch(() => NaN);
  const othersUp = others.filter((c) => c.closeCode === null).length;
  const crashed = /crash/i.test(fs.readFileSync(server.logFile, 'utf8'));
  for (const c of [a, b, ...others]) c.close();
  const errData = err?.data as { code?: number; message?: string } | undefined;
  const ok = errData?.code === 4301 && through && Number.isFinite(pingMs) && othersUp === others.length && a.closeCode === null && !crashed && server.alive();
  return {
    attack: '3. deep client event through a hook', ok,
    bound: 'clear pusher:error; no shard crash; same socket answers a ping; other sockets stay',
    measured: `pusher:error ${errData?.code} "${errData?.message}"; ping after ${pingMs.toFixed(1)} ms; ${othersUp}/${others.length} others connected; "crash" in log: ${crashed}`,
    figures: { depth, error: err?.data ?? null, hookCallsForIt: backend.calls.length - callsBefore - (through ? 1 : 0), pingAfterMs: +pingMs.toFixed(1), othersConnected: othersUp, crashInLog: crashed },
  };
}

/** 4. Another address names the victim's session id; then unknown-session probes from one address. */
export async function takeover(server: RunningTarget, probeSeconds: number): Promise<Result> {
  const v = await session(server.port, '127.0.0.1');
  if (!v) return { attack: '4. HTTP session takeover', ok: false, bound: '-', measured: 'the victim session did not open', figures: {} };
  const stolenSend = await xhrSend(server.port, v.id, [{ event: 'pusher:subscribe', data: { channel: 'stolen' } }], '127.0.0.2');
  const stolenPoll = await post(server.port, `${base(v.id)}/xhr?t=1&n=2`, '', '127.0.0.2', { 'user-agent': UA });
  // the victim's own subscribe: the marker that the stranger's never arrived
  await xhrSend(server.port, v.id, [{ event: 'pusher:subscribe', data: { channel: 'mine' } }], '127.0.0.1');
  await waitFor(() => v.r.frames().some((f) => f.channel === 'mine'), 5000);
  const crossed = v.r.frames().some((f) => f.channel === 'stolen');
  const victimUp = !v.r.ended;
  v.r.abort();
  // unknown-session probes from one address, one at a time, until throttled
  const started = performance.now();
  let answered404 = 0;
  let first429: { after: number; ms: number; error: string } | null = null;
  let other = 0;
  while (performance.now() - started < probeSeconds * 1000) {
    const r = await xhrSend(server.port, sid(), [], '127.0.0.5');
    if (r.status === 404) answered404++;
    else if (r.status === 429) { first429 ??= { after: answered404, ms: performance.now() - started, error: r.json?.error ?? '' }; if (performance.now() - started > 1000) break; }
    else other++;
  }
  const secs = (performance.now() - started) / 1000;
  const unknown = (r: Answer) => r.status === 404 && r.json?.error === `Unknown session ${v.id}`;
  const ok = unknown(stolenSend) && unknown(stolenPoll) && !crossed && victimUp && first429 !== null && other === 0;
  return {
    attack: '4. HTTP session takeover', ok,
    bound: 'another address gets the unknown-session answer (send and poll); unknown-session answers throttled',
    measured: `xhr_send ${stolenSend.status}, poll ${stolenPoll.status} "${stolenPoll.json?.error}"; nothing crossed: ${!crossed}; ${first429 ? `the first 429 after ${first429.after} unknown-session answers (${(first429.after / (first429.ms / 1000)).toFixed(0)}/s till then) from one address; ${answered404} 404 in ${secs.toFixed(1)} s` : `no 429 in ${secs.toFixed(1)} s (${answered404} 404)`}`,
    figures: { sendStatus: stolenSend.status, pollStatus: stolenPoll.status, pollError: stolenPoll.json?.error, crossed, victimUp, answered404, first429, otherStatuses: other, probeSeconds: +secs.toFixed(1) },
  };
}

/** 5. The body a subscribe hook receives for an HTTP session. */
export async function hookAddress(server: RunningTarget, backend: HookBackend): Promise<Result> {
  const s = await session(server.port, '127.0.0.1');
  if (!s) return { attack: '5. addresses in hooks', ok: false, bound: '-', measured: 'the session did not open', figures: {} };
  await xhrSend(server.port, s.id, [{ event: 'pusher:subscribe', data: { channel: 'hooked-session' } }], '127.0.0.1');
  await waitFor(() => backend.calls.some((c) => c.body.channel === 'hooked-session'), 5000);
  s.r.abort();
  const conn = backend.calls.find((c) => c.body.channel === 'hooked-session')?.body.connection ?? null;
  const ok = !!conn && conn.ip !== '' && conn.origin === ORIGIN && conn.user_agent === UA;
  return {
    attack: '5. addresses in hooks (HTTP session)', ok,
    bound: 'ip non-empty; origin and user agent as sent',
    measured: `connection ${JSON.stringify(conn)}`,
    figures: { connection: conn },
  };
}

/** 6. From 127.0.0.3: fallback sessions and WebSockets until refused; then 127.0.0.4 connects. */
export async function perAddressCap(server: RunningTarget, cap: number): Promise<Result> {
  const sessions: RawReceive[] = [];
  for (let i = 0; i < 4; i++) {
    const s = await session(server.port, '127.0.0.3');
    if (s) sessions.push(s.r);
  }
  const socks: Sock[] = [];
  let refusal: Sock | null = null;
  while (refusal === null && socks.length < cap + 10) {
    const batch = await Promise.all(Array.from({ length: 50 }, () => Sock.open(server.port, '127.0.0.3')));
    for (const c of batch) {
      if (c.socketId !== '') socks.push(c);
      else refusal ??= c;
      if (c.socketId === '' && c !== refusal) c.close();
    }
  }
  if (refusal) await refusal.until(() => refusal.closeCode !== null, 5000, 'the close').catch(() => undefined);
  const refusedErr = refusal?.frames.find((f) => f.event === 'pusher:error')?.data as { code?: number; message?: string } | undefined;
  const overSession = await post(server.port, `${base(sid())}/xhr_streaming?t=1&n=1`, '', '127.0.0.3', { 'user-agent': UA });
  const other = await Sock.open(server.port, '127.0.0.4');
  const otherOk = other.socketId !== '';
  const held = sessions.length + socks.length;
  other.close();
  for (const c of socks) c.close();
  for (const r of sessions) r.abort();
  refusal?.close();
  const ok = held === cap && refusedErr?.code === 4100 && refusal?.closeCode === 4100 && overSession.status === 429 && otherOk;
  return {
    attack: '6. per-address cap', ok,
    bound: `limits.max_connections_per_ip ${cap}: refused at the cap (4100 / 429); another address connects`,
    measured: `${held} held (${sessions.length} sessions + ${socks.length} WebSockets); next WebSocket: ${refusedErr?.code} "${refusedErr?.message}", closed ${refusal?.closeCode}; next session: ${overSession.status}; 127.0.0.4 connects: ${otherOk}`,
    figures: { cap, held, sessions: sessions.length, websockets: socks.length, refusal: refusedErr ?? null, refusalClose: refusal?.closeCode ?? null, sessionStatus: overSession.status, sessionError: overSession.json?.error, otherAddressConnects: otherOk },
  };
}

/** 7. An idempotency key on /events then in /batch_events, and the reverse. */
export async function idempotencyRoutes(server: RunningTarget): Promise<Result> {
  const run = Date.now().toString(36);
  const item = (k: string) => ({ name: 'idem', channel: 'plain-idem', data: k, idempotency_key: `${run}-${k}` });
  const ev = await api(server.port, 'events', item('ev'));
  const batch = await api(server.port, 'batch_events', { batch: [item('free'), item('ev')] });
  const free = await api(server.port, 'batch_events', { batch: [item('free')] });
  const reverse = await api(server.port, 'events', item('free'));
  const all = [ev, batch, free, reverse];
  const ok = ev.status === 200 && batch.status >= 400 && batch.status < 500 && free.status === 200 && reverse.status >= 400 && reverse.status < 500 && all.every((r) => r.status !== 500 && r.status !== 503);
  return {
    attack: '7. idempotency across routes', ok,
    bound: 'a clear 4xx, never 500, the batch\'s other keys never pending (503)',
    measured: `/events 200 → /batch_events ${batch.status}; its other key alone ${free.status}; that key on /events ${reverse.status}`,
    figures: { statuses: all.map((r) => r.status), batchError: batch.json?.error, reverseError: reverse.json?.error },
  };
}
