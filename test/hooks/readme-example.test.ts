// test-modes: once (the documented backend as written; hooks across shards: hooks, failures)
// The complete backend of docs/hooks.md ("Guide"), run as written (only its port changed):
// it admits presence members from its list and rewrites chat messages, behind pusher-js.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { connected, pusherJs } from '../helpers/pusher-js';
import { APP, startServer } from '../helpers/server';
import { freePort } from '../helpers/net';

const ROOT = path.resolve(__dirname, '..', '..', '..');

t.test('the documented backend: a member not on the list is refused, a chat message is rewritten', async (t) => {
  const doc = readFileSync(path.join(ROOT, 'docs', 'hooks.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Guide'));
  const code = /```js\n([\s\S]*?)```/.exec(section)![1];
  t.match(code, /\.listen\(3000, '127\.0\.0\.1'\)/);
  const port = await freePort();
  // in the repository, so that require('pusher') resolves to its node_modules
  const dir = mkdtempSync(path.join(ROOT, 'dist', 'readme-hooks-'));
  const file = path.join(dir, 'backend.js');
  writeFileSync(file, code.replace('.listen(3000,', `.listen(${port},`) + "\nconsole.log('ready');\n");
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));

  const srv = await startServer({ apps: [{ ...APP, hooks: {
    url: `http://127.0.0.1:${port}/ringcast-hooks`,
    subscribe: { enabled: true, channels: ['presence-*'] },
    client_event: { enabled: true, events: ['client-chat'] },
  } }] });
  t.teardown(() => srv.stop());
  const carol = srv.track(pusherJs(srv.port, { user: { user_id: 'carol' } }));
  const alice = srv.track(pusherJs(srv.port, { user: { user_id: 'alice' } }));
  const bob = srv.track(pusherJs(srv.port, { user: { user_id: 'bob' } }));
  await Promise.all([connected(carol), connected(alice), connected(bob)]);
  const refused = await new Promise((resolve) => carol.subscribe('presence-room-1').bind('pusher:subscription_error', resolve));
  t.same(refused, { type: 'AuthError', error: 'carol is not in presence-room-1', status: 403 });
  const a = alice.subscribe('presence-room-1');
  const b = bob.subscribe('presence-room-1');
  await Promise.all([a, b].map((c) => new Promise((r) => c.bind('pusher:subscription_succeeded', r))));
  const got = new Promise((resolve) => b.bind('client-chat', resolve));
  a.trigger('client-chat', { text: 'darn it' });
  t.same(await got, { text: '**** it' });
});
