// The ceiling of a thread-per-shard uWS server: the bare server of ceiling.ts on N worker
// threads, each a uWS App listening on the same port (SO_REUSEPORT, as ringcast's shards),
// with the least a publish needs to reach a subscriber on another thread. It is the floor
// of what `bench/shards/cpu-per-publish.ts` can measure for ringcast's design: a publish
// taken by one thread whose subscriber sits on another pays one cross-thread hop here too.
//
//   POST /apps/:id/events → for each channel: uWS publish on this thread if this thread
//                     has a subscriber of it, and one message to every other thread that has
//                     (ringcast's own interest table, channels/interest.ts: a shared bit
//                     per thread and channel slot); answers 200 {}. No auth, no limits.
//   WS  /app/:key     → connection_established, pusher:subscribe (sets this thread's bit),
//                     pusher:ping.
//
// The hop (--hop): `port`, a MessagePort message per publish (a libuv async handle); or
// `ring`, ringcast's own SharedArrayBuffer ring per pair of threads and doorbell per thread
// (src/bus/ring.ts, src/bus/doorbell.ts: Atomics.notify → Atomics.waitAsync) with none of
// the bus's ordering, framing or requests. The frame is built once on the thread that took
// the request.
//
//   node dist/bench/targets/ceiling-threads.js --port 6001 --threads 4 [--hop port|ring]

import { isMainThread, MessageChannel, type MessagePort, parentPort, Worker, workerData } from 'node:worker_threads';
import { createDoorbell, DoorbellListener, DoorbellRinger } from '../../src/bus/doorbell';
import { createRingBuffer, RingReader, RingWriter } from '../../src/bus/ring';
import { allocateInterest, Interest } from '../../src/channels/interest';
import type { TargetDef } from '../harness/target';
import { bareTarget, ceilingApp } from './ceiling';

export type Hop = 'port' | 'ring';

export function ceilingThreadsTarget(threads: number, hop: Hop = 'port'): TargetDef {
  return bareTarget(`ceiling-t${threads}-${hop}`, `ceiling (bare uWS) on ${threads} threads, hop: ${hop}`, 'ceiling-threads.js',
    ['--threads', String(threads), '--hop', hop]);
}

/** Every channel of the floor server belongs to one app (Interest hashes app and channel). */
const APP_ID = 'bench';

interface ThreadData {
  index: number; threads: number; port: number; interest: SharedArrayBuffer; hop: Hop;
  /** hop port: a port to every other thread (null at index). */
  ports: (MessagePort | null)[];
  /** hop ring: rings[a][b] carries a → b; doorbells[b] wakes b. */
  rings: (SharedArrayBuffer | null)[][];
  doorbells: SharedArrayBuffer[];
}

const RING_BYTES = 256 * 1024;

function serveThread(d: ThreadData): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const uWS = require('uWebSockets.js') as typeof import('uWebSockets.js');
  const interest = new Interest(d.interest, d.threads, d.index);
  const targets: number[] = [];
  let nextId = 1;
  let send: (t: number, ch: string, frame: string) => void = () => { throw new Error('the hop is not wired yet'); };
  const { app, sockets } = ceilingApp(uWS, {
    socketId: () => `${d.index + 1}.${nextId++}`,
    subscribed: (_ws, ch) => interest.add(APP_ID, ch), // before subscription_succeeded
    closed: (ws) => {
      for (const ch of ws.getUserData().channels) interest.remove(APP_ID, ch);
    },
    publish: (ch, frame) => {
      for (const t of interest.targets(APP_ID, ch, targets)) {
        if (t === d.index) app.publish(ch, frame, false);
        else send(t, ch, frame);
      }
    },
  });

  // The hop: send(t, ch, frame) to thread t; what arrives is published on this thread.
  let stopHop: () => void;
  if (d.hop === 'port') {
    for (const p of d.ports) {
      p?.on('message', (m: { ch: string; frame: string }) => {
        app.publish(m.ch, m.frame, false);
      });
    }
    send = (t, ch, frame) => d.ports[t]!.postMessage({ ch, frame });
    stopHop = () => { for (const p of d.ports) p?.close(); };
  } else {
    const writers = d.rings[d.index].map((sab, t) => {
      if (sab === null) return null;
      const ringer = new DoorbellRinger(d.doorbells[t]);
      return new RingWriter(sab, { onWritten: () => ringer.request() });
    });
    const readers = d.rings.flatMap((row) => (row[d.index] ? [new RingReader(row[d.index]!)] : []));
    // payload: channel bytes, 0, frame bytes
    const onFrame = (_type: number, payload: Uint8Array): void => {
      const zero = payload.indexOf(0);
      const b = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
      app.publish(b.toString('utf8', 0, zero), b.subarray(zero + 1), false);
    };
    const listener = new DoorbellListener(d.doorbells[d.index], () => {
      for (const r of readers) r.drain(onFrame);
    });
    listener.start();
    send = (t, ch, frame) => {
      if (!writers[t]!.write(1, Buffer.from(ch + '\0' + frame))) throw new Error('ring and spill full');
    };
    stopHop = () => listener.stop();
  }

  let listenSocket: import('uWebSockets.js').us_listen_socket | null = null;
  app.listen('127.0.0.1', d.port, (ls) => {
    listenSocket = ls || null;
    parentPort!.postMessage({ listening: !!ls });
  });

  parentPort!.on('message', (m: { stop?: boolean }) => {
    if (!m.stop) return;
    if (listenSocket) uWS.us_listen_socket_close(listenSocket);
    listenSocket = null;
    for (const ws of [...sockets]) ws.end(1001, 'shutdown');
    stopHop();
    parentPort!.close();
    // uWS must hold no socket when the thread ends (a client that does not answer the close)
    setTimeout(() => (app as unknown as { close(): void }).close(), 200).unref();
  });
}

async function main(port: number, threads: number, hop: Hop): Promise<void> {
  if (threads < 1 || threads > 64) throw new Error('--threads: 1 to 64');
  const rings = Array.from({ length: threads }, (_, a) => Array.from({ length: threads }, (_, b) => (a === b ? null : createRingBuffer(RING_BYTES))));
  const doorbells = Array.from({ length: threads }, () => createDoorbell());
  const interest = allocateInterest(threads);
  // one MessageChannel per pair of threads
  const ports: (MessagePort | null)[][] = Array.from({ length: threads }, () => Array<MessagePort | null>(threads).fill(null));
  for (let a = 0; a < threads; a++) {
    for (let b = a + 1; b < threads; b++) {
      const { port1, port2 } = new MessageChannel();
      ports[a][b] = port1;
      ports[b][a] = port2;
    }
  }
  const workers = ports.map((mine, index) => new Worker(__filename, {
    workerData: { index, threads, port, interest, hop, ports: mine, rings, doorbells } satisfies ThreadData,
    transferList: mine.filter((p): p is MessagePort => p !== null),
  }));
  const listening = await Promise.all(workers.map((w) => new Promise<boolean>((resolve, reject) => {
    w.once('message', (m: { listening: boolean }) => resolve(m.listening));
    w.once('error', reject);
  })));
  if (listening.includes(false)) {
    process.stderr.write(`ceiling-threads: cannot listen on 127.0.0.1:${port}\n`);
    process.exit(1);
  }
  process.stdout.write(`ceiling-threads listening on 127.0.0.1:${port} (${threads} threads)\n`);
  const shutdown = (): void => {
    for (const w of workers) w.postMessage({ stop: true });
    void Promise.all(workers.map((w) => new Promise((r) => w.once('exit', r)))).then(() => process.exit(0));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

if (!isMainThread) {
  serveThread(workerData as ThreadData);
} else if (require.main === module) {
  const arg = (name: string, def: number): number => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : def;
  };
  const h = process.argv.indexOf('--hop');
  const hop = h >= 0 ? process.argv[h + 1] : 'port';
  if (hop !== 'port' && hop !== 'ring') {
    process.stderr.write(`ceiling-threads: --hop: "${hop}" is not port or ring\n`);
    process.exit(2);
  }
  main(arg('--port', 6001), arg('--threads', 1), hop).catch((err: unknown) => {
    process.stderr.write(`ceiling-threads: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
