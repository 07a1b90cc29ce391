// An HTTP fallback stream whose client stops reading, end to end: what the server holds for
// it stays within the session's bound (the 256 KiB a stream is written before pusher-js
// reopens it, what uWS holds while it reports backpressure, and the session's queue, bounded
// like a WebSocket's: 2 × websocket.max_bytes; on_backpressure close: the session ends with
// 4100). The unit half (nothing written while uWS reports backpressure) is in
// session.test.ts. Workers 1 and 4 (RINGCAST_TEST_WORKERS): with 4 the stream is mostly
// relayed, and the relaying shard lets it go past the bound so that home's queue takes over.

import net from 'node:net';
import t from 'tap';
import { rawRequest } from '../helpers/http';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';

t.setTimeout(120_000);

/** 30 MB: far past what the kernel's buffers and the session's queue hold. */
const MAX_BATCHES = 300;

t.test(`a stream the client does not read ends the session past websocket.max_bytes (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({ websocket: { on_backpressure: 'close' }, http_fallback: { disconnect_delay: 30 } });
  t.teardown(() => srv.stop());
  const id = `bp${process.pid.toString(32)}`.slice(0, 8);
  const path = `/pusher/app/${APP.key}/1/${id}`;

  // the stream on a raw socket, paused once the session is established
  const sock = net.connect(srv.port, '127.0.0.1');
  t.teardown(() => sock.destroy());
  let head = '';
  sock.setEncoding('utf8');
  const established = new Promise<void>((resolve) => {
    const onData = (c: string) => {
      head += c;
      if (!head.includes('connection_established')) return;
      sock.off('data', onData);
      sock.pause(); // the client stops reading
      resolve();
    };
    sock.on('data', onData);
  });
  sock.write(`POST ${path}/xhr_streaming HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n`);
  await established;

  const send = (frames: unknown[]) => rawRequest(srv.port, 'POST', `${path}/xhr_send`, JSON.stringify(frames.map((f) => JSON.stringify(f))));
  t.equal((await send([{ event: 'pusher:subscribe', data: { channel: 'bulk' } }])).status, 204);
  const sdk = srv.sdk();
  await eventually(async () => ((await sdk.get({ path: '/channels/bulk' })).json() as Promise<{ occupied: boolean }>).then((c) => c.occupied), 5000, 'the subscription');

  // ~100 KB a batch (well below max_bytes in one turn: only a client that keeps not reading is
  // over it); the kernel's socket buffers take a few MB, then uWS reports backpressure
  const big = 'x'.repeat(10_000);
  let batches = 0;
  let status = 204;
  while (status === 204 && batches < MAX_BATCHES) {
    await sdk.triggerBatch(Array.from({ length: 10 }, (_, i) => ({ channel: 'bulk', name: 'ev', data: `${i}${big}` })));
    batches++;
    status = (await send([])).status; // the positive marker: 404 once the session has ended
  }
  t.equal(status, 404, `the session ended after ${batches} batches (~${(batches / 10).toFixed(1)} MB published)`);
  t.ok(batches < MAX_BATCHES, 'before the publisher gave up');
});
