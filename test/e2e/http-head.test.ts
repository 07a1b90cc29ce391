// test-modes: once (one request on one kept-alive connection, answered by the shard that reads it)
// HEAD on an unknown route: 404 without a body, so the next answer on the same
// kept-alive connection is intact.
import net from 'node:net';
import t from 'tap';
import { startServer } from '../helpers/server';

t.test('HEAD gets a bodiless 404 and the connection stays usable', async (t) => {
  const srv = await startServer();
  const raw = await new Promise<string>((resolve, reject) => {
    const s = net.connect(srv.port, '127.0.0.1', () => s.write('HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\nGET /up HTTP/1.1\r\nHost: x\r\n\r\n'));
    let buf = '';
    s.on('data', (d) => {
      buf += d;
      if (buf.includes('"status":"ok"')) { s.destroy(); resolve(buf); }
    });
    s.on('error', reject);
    setTimeout(() => { s.destroy(); resolve(buf); }, 3000);
  });
  const [head, rest] = raw.split(/\r\n\r\n/, 2);
  t.match(head, /^HTTP\/1\.1 404/);
  t.match(rest, /^HTTP\/1\.1 200 OK/, 'the next answer starts right after the HEAD answer');
  t.match(raw, /"status":"ok"/);
  await srv.stop();
});
