// JS heap per idle HTTP fallback session (the Session object, its SocketData and one topic
// entry), measured with forced GCs: node --expose-gc dist/bench/fallback/session-memory.js [N]
// Excludes what uWS holds for the open receiving request (its socket and buffers, native).

import { nativeFanout } from '../../src/channels/fanout';
import { createSessionTopics } from '../../src/fallback/hub';
import { Session } from '../../src/fallback/session';
import { newSocketData } from '../../src/ws/connection';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const n = Number(process.argv[2] ?? '20000');
const topics = createSessionTopics(nativeFanout({ publish: () => true, numSubscribers: () => 0 }));
const env = {
  handlers: { open() {}, message() {}, close() {} },
  topics, maxQueueBytes: 1 << 21, closeOnOverflow: false, onClosed() {}, now: Date.now,
};
const receiver = { streaming: true, write() {}, end() {} };
const keep: Session[] = [];
gc();
const before = process.memoryUsage().heapUsed;
for (let i = 0; i < n; i++) {
  const s = new Session(`s${i}`, 'app-key', { ip: '127.0.0.1', ua: '' }, newSocketData(`1.${i}`, null, null), env);
  s.attach(receiver);
  s.subscribe('app-id\0bench');
  keep.push(s);
}
setTimeout(() => { // after the attaches' flushes
  gc();
  const after = process.memoryUsage().heapUsed;
  console.log(JSON.stringify({ sessions: keep.length, heap_bytes_per_session: Math.round((after - before) / n) }));
}, 10);
