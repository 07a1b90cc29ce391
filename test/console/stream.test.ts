// The live log's backpressure (console/hub.ts): a console client that stops reading while
// many events are published does not make the server buffer without bound: its send buffer
// stays within console.stream_max_buffered_kb (ringcast_console_stream_buffered_bytes),
// the events it could not take are counted (ringcast_console_stream_dropped_total), another
// console client keeps receiving every event, and the slow one, once it reads again, is
// told how many it missed. Bounded: at most 20,000 publishes or 60 s.
// (Linux's loopback buffers take a few MB before the server's own buffer grows.)

import net from 'node:net';
import http from 'node:http';
import t from 'tap';
import { APP, WORKERS, startServer } from '../helpers/server';
import { LiveLog, TOKEN, bearer, consoleRequest, metricValue } from '../helpers/console';

const BOUND_KB = 16;
const DATA = 'x'.repeat(1000);

t.test(`a console client that does not read is bounded; the others keep receiving (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({
    metrics: { enabled: true, host: '127.0.0.1', port: 0 },
    console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, stream_max_buffered_kb: BOUND_KB },
  });
  t.teardown(() => srv.stop());
  const port = srv.server.consolePort!;
  const metrics = srv.server.metricsPort!;

  // The slow client: a raw socket that sends the request and then never reads (no 'data'
  // listener: node stops reading it once its own small buffer is full, the kernel's fill).
  const slow = net.connect(port, '127.0.0.1');
  t.teardown(() => slow.destroy());
  await new Promise<void>((r) => slow.once('connect', () => r()));
  slow.write(`GET /api/apps/${APP.id}/events HTTP/1.1\r\nHost: console\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
  slow.pause();
  const good = new LiveLog(port, APP.id);
  t.teardown(() => good.close());

  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  t.teardown(() => agent.destroy());
  const publish = (event: string, data = DATA) => new Promise<number>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `/api/apps/${APP.id}/publish`, agent,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode ?? 0)); });
    req.on('error', reject);
    req.end(JSON.stringify({ channel: 'flood', event, data }));
  });
  // both streams are registered once a publish shows in the good one
  t.equal(await publish('first', 'x'), 200);
  await good.next((e) => e.event === 'first');

  const rss0 = process.memoryUsage().rss;
  const t0 = Date.now();
  let sent = 0;
  let dropped = 0;
  let maxBuffered = 0;
  while (sent < 20_000 && Date.now() - t0 < 60_000) {
    const statuses = await Promise.all(Array.from({ length: 50 }, (_, i) => publish(`ev-${sent + i}`)));
    const refused = statuses.find((s) => s !== 200);
    if (refused !== undefined) t.fail(`a publish answered ${refused}`);
    sent += 50;
    if (sent % 500 === 0) {
      maxBuffered = Math.max(maxBuffered, await metricValue(metrics, 'console_stream_buffered_bytes'));
      dropped = await metricValue(metrics, 'console_stream_dropped_total');
      if (dropped >= 100) break;
    }
  }
  t.comment(`${sent} events in ${Date.now() - t0} ms; dropped for the slow client: ${dropped}; RSS +${((process.memoryUsage().rss - rss0) / 1048576).toFixed(1)} MB`);
  t.ok(dropped >= 100, `the slow client's events were dropped and counted (${dropped} of ${sent})`);
  t.ok(maxBuffered <= (BOUND_KB + 4) * 1024, `the server's send buffers stayed within the bound: ${maxBuffered} bytes ≤ ${BOUND_KB} KiB + one event`);

  // The good client got every event, in order, and nothing was dropped for it.
  t.equal(await publish('marker', 'end'), 200);
  await good.next((e) => e.event === 'marker', 30_000);
  const evs = good.events.filter((e) => e.kind === 'api' && e.event?.startsWith('ev-')).length;
  t.equal(evs, sent, 'the reading client received every event');
  t.notOk(good.events.some((e) => e.kind === 'dropped'), 'and no drop notice');

  // The slow client reads again: it gets what was buffered, a notice of how many it missed, then live events.
  let text = '';
  slow.on('data', (c: Buffer) => { text += c.toString(); });
  slow.resume();
  const notice = /data: (\{[^\n]*"kind":"dropped"[^\n]*\})/;
  for (let i = 0; i < 200 && !notice.test(text); i++) await new Promise((r) => setTimeout(r, 50));
  const m = notice.exec(text);
  t.ok(m, 'the slow client is told it missed events');
  const n = m ? JSON.parse(m[1]) as { reason: string; count: number } : { reason: '', count: 0 };
  t.equal(n.reason, 'slow_client');
  t.equal(n.count, await metricValue(metrics, 'console_stream_dropped_total'), 'its count is the events dropped for it (counted in the metric)');
  t.equal(await publish('after', 'live'), 200);
  for (let i = 0; i < 200 && !text.includes('"event":"after"'); i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(text.includes('"event":"after"'), 'and receives live events again');
});

t.test('live log streams are bounded in number (console.max_streams): one more gets 503 naming the key', async (t) => {
  const srv = await startServer({ console: { enabled: true, host: '127.0.0.1', port: 0, token: TOKEN, max_streams: 2 } });
  t.teardown(() => srv.stop());
  const port = srv.server.consolePort!;
  const a = new LiveLog(port, APP.id);
  const b = new LiveLog(port, APP.id);
  t.teardown(() => { a.close(); b.close(); });
  for (let i = 0; i < 100 && (a.status === 0 || b.status === 0); i++) await new Promise((r) => setTimeout(r, 20));
  t.same([a.status, b.status], [200, 200]);
  const third = await consoleRequest(port, 'GET', `/api/apps/${APP.id}/events`, { headers: bearer() });
  t.equal(third.status, 503);
  t.match(third.json.error, /too many live log streams open \(console\.max_streams: 2\)/);
  a.close();
  let status = 503;
  for (let i = 0; i < 100 && status === 503; i++) {
    await new Promise((r) => setTimeout(r, 20));
    const c = new LiveLog(port, APP.id);
    for (let j = 0; j < 100 && c.status === 0; j++) await new Promise((r) => setTimeout(r, 10));
    status = c.status;
    c.close();
  }
  t.equal(status, 200, 'a closed stream frees its place');
});
