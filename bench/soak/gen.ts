// Soak client process: `conns` connection slots, each looping: connect, subscribe to a
// random channel, stay a random time (counting the soak events of that channel: first,
// last, gaps, disorder, latency), unsubscribe and subscribe elsewhere or disconnect, and
// again. Finished subscriptions go to the harness every second (soak.ts decides what was
// lost: it knows when each publish was answered). Exits when its parent goes away.

import WebSocket from 'ws';
import { nowMs, type GenCommand, type GenReply, type GenStart, type GenStats, type Session } from './protocol';

let cfg: GenStart;
let running = false;
const done: Session[] = [];
const stats: GenStats = { opened: 0, open: 0, unexpectedCloses: {}, errors: {}, messages: 0 };
const slots = new Set<Slot>();

let rnd = 1;
function random(): number { // xorshift32: reproducible per seed
  rnd ^= rnd << 13; rnd ^= rnd >>> 17; rnd ^= rnd << 5;
  return (rnd >>> 0) / 4294967296;
}
const between = (a: number, b: number) => a + random() * (b - a);
const count = (m: Record<string, number>, k: string) => { m[k] = (m[k] ?? 0) + 1; };
const sleep = (ms: number) => new Promise<void>((r) => { const t = setTimeout(r, ms); t.unref?.(); });

function send(msg: GenReply): void {
  if (process.connected) process.send!(msg);
}

interface Current { ch: string; session: Session; prev: number; confirmed: boolean }

class Slot {
  private ws: WebSocket | null = null;
  private cur: Current | null = null;
  private leaving = false;
  private wake: (() => void) | null = null;
  private waitingFor: 'established' | 'subscribed' | 'closed' | null = null;

  async run(): Promise<void> {
    await sleep(random() * cfg.rampMs);
    while (running) {
      try {
        await this.connection();
      } catch (err) {
        count(stats.errors, (err as Error).message);
      }
      if (running) await sleep(between(50, 500));
    }
  }

  /** Resolves when `what` happens (or the socket closes first: rejects). */
  private until(what: 'established' | 'subscribed' | 'closed'): Promise<void> {
    this.waitingFor = what;
    return new Promise<void>((resolve) => { this.wake = resolve; });
  }

  private fire(what: 'established' | 'subscribed' | 'closed'): void {
    if (this.waitingFor !== what && what !== 'closed') return;
    const w = this.wake;
    this.wake = null;
    this.waitingFor = null;
    w?.();
  }

  private async connection(): Promise<void> {
    this.leaving = false;
    const ws = new WebSocket(`ws://127.0.0.1:${cfg.port}/app/${cfg.appKey}?protocol=7&client=soak&version=1`, { perMessageDeflate: false });
    this.ws = ws;
    let opened = false;
    let closed = false;
    ws.on('error', (err) => count(stats.errors, opened ? `socket error: ${err.message}` : `connect: ${err.message}`));
    ws.on('close', (code) => {
      closed = true;
      if (opened) stats.open--;
      if (!this.leaving) count(stats.unexpectedCloses, String(code));
      this.endSession(nowMs());
      this.fire('closed');
    });
    // binaryType is ws's default 'nodebuffer': each message is one Buffer.
    ws.on('message', (raw) => this.onMessage((raw as Buffer).toString()));
    const est = this.until('established');
    await est;
    if (closed) return;
    opened = true;
    stats.opened++;
    stats.open++;
    const sessions = 1 + Math.floor(random() * cfg.maxSessions);
    let last = -1;
    for (let i = 0; i < sessions && running && !closed; i++) {
      let ch = Math.floor(random() * cfg.channels);
      if (ch === last) ch = (ch + 1) % cfg.channels;
      last = ch;
      const name = `soak-${ch}`;
      this.cur = { ch: name, prev: -1, confirmed: false, session: { ch, s: 0, u: 0, first: -1, last: -1, count: 0, gaps: [], disorder: 0, maxLatency: 0 } };
      const sub = this.until('subscribed');
      ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: name } }));
      await sub;
      if (closed) return;
      await this.stay(between(cfg.stayMs[0], cfg.stayMs[1]));
      if (closed) return;
      const u = nowMs();
      if (i + 1 < sessions && running) ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel: name } }));
      this.endSession(u);
    }
    if (closed) return;
    this.leaving = true;
    const gone = this.until('closed');
    ws.close(1000);
    await gone;
  }

  /** Stays subscribed for ms, or until stop. */
  private async stay(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (running && Date.now() < until && this.cur) await sleep(Math.min(500, until - Date.now()));
  }

  /** Ends the current subscription at u (the moment the client decided to leave). */
  private endSession(u: number): void {
    const c = this.cur;
    this.cur = null;
    if (!c || !c.confirmed) return;
    c.session.u = u;
    done.push(c.session);
  }

  /** Stop: ends the open subscription now and closes. */
  stop(): Promise<void> {
    this.endSession(nowMs());
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    this.leaving = true;
    return new Promise((resolve) => {
      ws.once('close', () => resolve());
      ws.close(1000);
      setTimeout(() => { ws.terminate(); resolve(); }, 3000).unref();
    });
  }

  private onMessage(text: string): void {
    let f: { event?: string; channel?: string; data?: unknown };
    try {
      f = JSON.parse(text) as typeof f;
    } catch {
      count(stats.errors, 'unparseable frame');
      return;
    }
    switch (f.event) {
      case 'pusher:connection_established':
        return this.fire('established');
      case 'pusher_internal:subscription_succeeded':
        if (this.cur && f.channel === this.cur.ch) {
          this.cur.confirmed = true;
          this.cur.session.s = nowMs();
          this.fire('subscribed');
        }
        return;
      case 'pusher:subscription_error':
        count(stats.errors, 'subscription_error');
        this.ws?.close(1000);
        return;
      case 'pusher:error':
        count(stats.errors, `pusher:error ${JSON.stringify(f.data)}`);
        return;
      case 'pusher:ping':
        this.ws?.send('{"event":"pusher:pong","data":{}}');
        return;
      case 'soak': {
        stats.messages++;
        const c = this.cur;
        if (!c || !c.confirmed || f.channel !== c.ch) return; // a channel just left: in flight, ignored
        const { seq, t } = JSON.parse(f.data as string) as { seq: number; t: number };
        const s = c.session;
        s.maxLatency = Math.max(s.maxLatency, nowMs() - t);
        if (c.prev >= 0 && seq <= c.prev) { s.disorder++; return; }
        if (c.prev >= 0) for (let g = c.prev + 1; g < seq; g++) s.gaps.push(g);
        if (s.first < 0) s.first = seq;
        s.last = seq;
        s.count++;
        c.prev = seq;
        return;
      }
      default:
    }
  }
}

function report(type: 'sessions' | 'stopped'): void {
  send({ type, list: done.splice(0), stats: { ...stats, unexpectedCloses: { ...stats.unexpectedCloses }, errors: { ...stats.errors } } });
}

process.on('message', (m: GenCommand) => {
  if (m.type === 'start') {
    cfg = m;
    rnd = m.seed | 0 || 1;
    running = true;
    for (let i = 0; i < m.conns; i++) {
      const s = new Slot();
      slots.add(s);
      void s.run();
    }
    setInterval(() => report('sessions'), 1000).unref();
  } else if (m.type === 'stop') {
    running = false;
    void Promise.all([...slots].map((s) => s.stop())).then(() => {
      report('stopped');
      setTimeout(() => process.exit(0), 100);
    });
  }
});
process.on('disconnect', () => process.exit(0));
