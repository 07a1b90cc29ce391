// The ring mesh's shape: ring size derived from the thread count when bus.ring_bytes is
// not set (docs/benchmarks.md, "Ring memory at 16–32 threads").
import t from 'tap';
import { createDoorbell } from '../../src/bus/doorbell';
import { HEADER_BYTES } from '../../src/bus/layout';
import { createRingBuffer } from '../../src/bus/ring';
import { AUTO_RING_MAX, AUTO_RING_MIN, RING_BYTES_PER_THREAD, createTopology, ringBytesFor } from '../../src/bus/topology';

const KiB = 1024;

t.test('ringBytesFor: 4 MiB of incoming ring per thread, a power of two in [32 KiB, 256 KiB]', async (t) => {
  const table: [number, number][] = [[1, 256], [2, 256], [5, 256], [9, 256], [17, 256], [18, 128], [33, 128], [34, 64], [65, 64], [66, 32], [129, 32], [257, 32]];
  for (const [threads, kib] of table) t.equal(ringBytesFor(threads), kib * KiB, `${threads} threads → ${kib} KiB`);
  for (let threads = 1; threads <= 300; threads++) {
    const b = ringBytesFor(threads);
    if ((b & (b - 1)) !== 0 || b < AUTO_RING_MIN || b > AUTO_RING_MAX) t.fail(`${threads}: ${b} is not a power of two in range`);
    if (b > AUTO_RING_MIN && b * (threads - 1) > RING_BYTES_PER_THREAD) t.fail(`${threads}: ${b} × ${threads - 1} passes the per-thread budget`);
    if (b < AUTO_RING_MAX && 2 * b * (threads - 1) <= RING_BYTES_PER_THREAD) t.fail(`${threads}: ${b} is not the largest that fits`);
  }
  t.throws(() => ringBytesFor(0), RangeError);
  t.throws(() => ringBytesFor(2.5), RangeError);
});

t.test('createTopology: a ring per ordered pair, of bus.ring_bytes or the derived size', async (t) => {
  const auto = createTopology(18, null, 1 << 20, createRingBuffer, createDoorbell);
  t.equal(auto.ringBytes, 128 * KiB);
  t.equal(auto.rings[0][17]!.byteLength, HEADER_BYTES + 128 * KiB);
  t.equal(auto.rings[5][5], null, 'none on the diagonal');
  t.equal(auto.rings.flat().filter((r) => r !== null).length, 18 * 17);
  t.equal(auto.doorbells.length, 18);
  const set = createTopology(3, 5000, 1 << 20, createRingBuffer, createDoorbell);
  t.equal(set.ringBytes, 5000, 'bus.ring_bytes wins');
  t.equal(set.rings[1][2]!.byteLength, HEADER_BYTES + 8192, 'rounded up to a power of two by createRingBuffer');
});
