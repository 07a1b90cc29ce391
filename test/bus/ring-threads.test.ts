import t from 'tap';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { createDoorbell, DoorbellListener, DoorbellRinger } from '../../src/bus/doorbell';
import { createRingBuffer } from '../../src/bus/ring';
import { consume, ConsumeResult, produce, ProduceResult } from './fixtures/ring-worker';

const FIXTURE = join(__dirname, 'fixtures', 'ring-worker.js');
const COUNT = 200_000;

function spawn<R>(workerData: object): Promise<R> {
  return new Promise((resolve, reject) => {
    const w = new Worker(FIXTURE, { workerData, execArgv: [] }); // not tap's loaders: plain, fast start
    let result: R | undefined;
    w.once('message', m => { result = m as R; });
    w.once('error', reject);
    w.once('exit', code => (code === 0 && result !== undefined ? resolve(result) : reject(new Error(`worker exit ${code}`))));
  });
}

/** A pending Atomics.waitAsync does not keep the main thread alive; this does, until p settles. */
async function keepAlive<T>(p: Promise<T>): Promise<T> {
  const timer = setInterval(() => {}, 1000);
  try { return await p; } finally { clearInterval(timer); }
}

t.test('producer in a worker, consumer in the main thread', { timeout: 30_000 }, async t => {
  const ring = createRingBuffer(64 * 1024);
  const doorbell = createDoorbell();
  const start = Date.now();
  const [sent, got] = await keepAlive(Promise.all([
    spawn<ProduceResult>({ role: 'produce', ring, doorbell, count: COUNT, maxSpillBytes: 1 << 20 }),
    consume([ring], doorbell, [COUNT]),
  ]));
  t.same(got.errors, [], 'no loss, reorder or corruption');
  t.equal(got.frames[0], COUNT);
  t.equal(got.bytes, sent.bytes, 'same byte total both sides');
  t.comment(`${COUNT} frames, ${(sent.bytes / 1e6).toFixed(1)} MB in ${Date.now() - start} ms; ${sent.refusals} refusals (spill bound 1 MiB)`);
});

t.test('producer in the main thread, consumer in a worker', { timeout: 30_000 }, async t => {
  const ring = createRingBuffer(64 * 1024);
  const doorbell = createDoorbell();
  const [sent, got] = await Promise.all([
    produce({ ring, doorbell, count: COUNT, maxSpillBytes: 1 << 20 }),
    spawn<ConsumeResult>({ role: 'consume', rings: [ring], doorbell, expected: [COUNT] }),
  ]);
  t.same(got.errors, []);
  t.equal(got.frames[0], COUNT);
  t.equal(got.bytes, sent.bytes);
});

t.test('two producer workers, two rings, one doorbell, one consumer', { timeout: 30_000 }, async t => {
  const rings = [createRingBuffer(16 * 1024), createRingBuffer(64 * 1024)];
  const doorbell = createDoorbell();
  const n = COUNT / 2;
  const [a, b, got] = await keepAlive(Promise.all([
    spawn<ProduceResult>({ role: 'produce', ring: rings[0], doorbell, count: n }),
    spawn<ProduceResult>({ role: 'produce', ring: rings[1], doorbell, count: n }),
    consume(rings, doorbell, [n, n]),
  ]));
  t.same(got.errors, []);
  t.same(got.frames, [n, n]);
  t.equal(got.bytes, a.bytes + b.bytes);
});

t.test('doorbell: one ring per turn, wake on change, idle without spinning, stop()', async t => {
  const bell = createDoorbell();
  const count = new Int32Array(bell);
  const ringer = new DoorbellRinger(bell);
  for (let i = 0; i < 100; i++) ringer.request();
  t.equal(Atomics.load(count, 0), 0, 'nothing rung synchronously');
  await Promise.resolve();
  t.equal(Atomics.load(count, 0), 1, '100 requests in one turn → one ring');
  let wakes = 0;
  const listener = new DoorbellListener(bell, () => { wakes++; });
  const sleep = (ms: number) => keepAlive(new Promise(r => setTimeout(r, ms)));
  // A second listener on the same doorbell is the marker: one notify wakes every waiter in
  // the order they started waiting, so once it has woken from a ring, a listener that was
  // waiting before it has run its wake too.
  let marks = 0;
  const marker = new DoorbellListener(bell, () => { marks++; });
  const markerWoke = async (n: number) => {
    for (let i = 0; i < 200 && marks < n; i++) await sleep(10);
    t.equal(marks, n, `marker listener woken (${n})`);
  };
  listener.start();
  t.equal(wakes, 1, 'start() calls onWake once at once');
  await sleep(30); // idle a while (pace only)
  marker.start();
  ringer.ringNow();
  await markerWoke(2);
  t.equal(wakes, 2, 'idle: no spurious wakes; woken by the ring');
  listener.stop(); // its notify wakes the marker once (documented on stop())
  await markerWoke(3);
  ringer.ringNow();
  await markerWoke(4);
  t.equal(wakes, 2, 'no wake after stop()');
  marker.stop();
});
