// test-modes: once (the example as a user runs it; the server paths it uses run with 1 and 4 shards elsewhere)
// examples/chat-server.ts in headless Chromium (Debian `chromium`, driven by
// playwright-core; scripts/deps.sh installs it, and its absence fails the test): two pages
// join presence-chat, see each other in the member list, see each other type (client
// events) and chat (messages published by the example's backend with the `pusher` SDK).
// Then with examples/chat/config.yaml's app: the backend's hooks refuse a blocked name and
// star out bad words, a late page gets the last messages (rewind), and a page cut off the
// network gets the ones it missed, once each (withRecovery).

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import type { Page } from 'playwright-core';
import { CHROMIUM, ROOT, launchChromium } from '../helpers/browser';
import { cutProxy } from '../helpers/cut-proxy';
import { freePort } from '../helpers/net';
import { startChatServer } from '../../examples/chat-server';
import { HOOKS_PATH } from '../../examples/hooks-backend';
import { APP, WORKERS, eventually, startServer } from '../helpers/server';

const WAIT = { timeout: 20_000 };

async function join(page: Page, url: string, name: string): Promise<void> {
  await page.goto(url);
  await page.fill('#name', name);
  await page.click('#join button');
  await page.waitForSelector('#chat:not([hidden])', WAIT);
}

const members = (page: Page): Promise<string[]> => page.$$eval('#members li', (lis) => lis.map((li) => li.textContent ?? ''));
// Page-side expressions are strings: the test's compiler has no DOM types.
const sees = (line: string): string => `[...document.querySelectorAll('#log li')].some((li) => li.textContent === ${JSON.stringify(line)})`;
const log = (page: Page): Promise<string[]> => page.$$eval('#log li', (lis) => lis.map((li) => li.textContent ?? ''));

t.test('two browser pages join, type and chat through the chat example', async (t) => {
  // scripts/deps.sh (make test) installs Debian's chromium: its absence is a failure, not a skip
  t.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} exists (make deps installs it)`);
  const srv = await startServer({});
  t.teardown(() => srv.stop());
  const chat = await startChatServer({ port: 0, ringcastHost: '127.0.0.1', ringcastPort: srv.port, publicHost: '127.0.0.1', appId: APP.id, key: APP.key, secret: APP.secret });
  t.teardown(() => chat.close());
  const browser = await launchChromium(t);
  const url = `http://127.0.0.1:${chat.port}/`;

  const alice = await browser.newPage();
  await join(alice, url, 'Alice');
  t.same(await members(alice), ['Alice (you)'], 'Alice joins an empty room');

  const bob = await browser.newPage();
  await join(bob, url, 'Bob');
  t.same((await members(bob)).sort(), ['Alice', 'Bob (you)'], 'Bob sees Alice and himself');
  await alice.waitForFunction("document.querySelectorAll('#members li').length === 2", undefined, WAIT);
  t.same((await members(alice)).sort(), ['Alice (you)', 'Bob'], 'Alice sees Bob join');
  t.ok((await log(alice)).includes('Bob joined'), 'Alice is told Bob joined');

  // Typing: a client event from Bob's page, shown by Alice's under the name the member
  // list holds for Bob's user_id.
  await bob.type('#text', 'hi Al');
  await alice.waitForFunction("document.getElementById('typing').textContent === 'Bob is typing…'", undefined, WAIT);
  t.equal(await bob.textContent('#typing'), '', 'client events are not echoed to the sender');

  // Chat: posted to the example's backend, published with the pusher SDK, seen by both.
  await bob.fill('#text', 'hi Alice');
  await bob.click('#chat button');
  for (const page of [alice, bob]) {
    await page.waitForFunction(sees('Bob: hi Alice'), undefined, WAIT);
  }
  t.equal(await alice.textContent('#typing'), '', 'the message clears Bob\'s typing indicator');
  await alice.fill('#text', 'hello Bob');
  await alice.click('#chat button');
  await bob.waitForFunction(sees('Alice: hello Bob'), undefined, WAIT);
  t.pass('both pages chat');

  // Bob leaves: Alice's list shrinks.
  await bob.close();
  await alice.waitForFunction("document.querySelectorAll('#members li').length === 1", undefined, WAIT);
  t.same(await members(alice), ['Alice (you)'], 'Alice sees Bob leave');
  t.ok((await log(alice)).includes('Bob left'));
});

/** The app of examples/chat/config.yaml, its hooks pointed at a chat backend on `port`. */
function exampleApp(port: number): Record<string, unknown> {
  const file = parse(fs.readFileSync(path.join(ROOT, 'examples/chat/config.yaml'), 'utf8')) as { apps: { hooks: { url: string } }[] };
  const app = file.apps[0];
  return { ...app, hooks: { ...app.hooks, url: `http://127.0.0.1:${port}${HOOKS_PATH}` } };
}

t.test(`the chat example with its config: hooks, rewind and recovery (${WORKERS} workers)`, async (t) => {
  const chatPort = await freePort();
  const app = exampleApp(chatPort);
  t.match(app, { id: APP.id, key: APP.key, secret: APP.secret, channel_history: { 'chat-log': { rewind: 20 } } }, 'the example config keeps chat-log\'s history');
  const srv = await startServer({ apps: [app as never] });
  t.teardown(() => srv.stop());
  // the pages reach ringcast through a proxy that can cut them off
  const px = await cutProxy(srv.port);
  t.teardown(() => px.close());
  const chat = await startChatServer({ port: chatPort, ringcastHost: '127.0.0.1', ringcastPort: srv.port, publicHost: '127.0.0.1', publicPort: px.port, appId: APP.id, key: APP.key, secret: APP.secret });
  t.teardown(() => chat.close());
  const browser = await launchChromium(t);
  const url = `http://127.0.0.1:${chat.port}/`;
  const say = async (page: Page, text: string): Promise<void> => {
    await page.fill('#text', text);
    await page.click('#chat button');
  };
  const messages = async (page: Page): Promise<string[]> => (await log(page)).filter((l) => l.includes(': '));

  // The subscribe hook: a blocked name is refused with the backend's reason.
  const mallory = await browser.newPage();
  await mallory.goto(url);
  await mallory.fill('#name', 'Mallory');
  await mallory.click('#join button');
  await mallory.waitForFunction(sees('could not join: Mallory is not welcome in presence-chat'), undefined, WAIT);
  t.equal(await mallory.isHidden('#chat'), true, 'Mallory gets no chat form');

  // The publish hook: bad words are starred out before anyone gets the message.
  const alice = await browser.newPage();
  await join(alice, url, 'Alice');
  t.same(await members(alice), ['Alice (you)'], 'Mallory is not in the room');
  await say(alice, 'hello');
  await say(alice, 'darn, the heck');
  await alice.waitForFunction(sees('Alice: ****, the ****'), undefined, WAIT);

  // Rewind: Bob, joining later, gets the messages sent before he came, then live ones.
  const bob = await browser.newPage();
  await join(bob, url, 'Bob');
  await bob.waitForFunction(sees('Alice: ****, the ****'), undefined, WAIT);
  await say(alice, 'welcome Bob');
  await bob.waitForFunction(sees('Alice: welcome Bob'), undefined, WAIT);
  t.same(await messages(bob), ['Alice: hello', 'Alice: ****, the ****', 'Alice: welcome Bob'], 'Bob: the last messages, then live, once each');

  // Recovery: every page is cut off (a dropped network: no close frame); what Alice's
  // messages say meanwhile reaches them once they are back, once each, in order.
  px.cut();
  const sdk = srv.sdk();
  for (let i = 1; i <= 5; i++) await sdk.trigger('chat-log', 'message', { name: 'Carol', text: `while you were away ${i}`, at: Date.now() });
  const before = px.accepted();
  px.allow();
  // pusher-js reconnects by itself (after a back-off of a few seconds)
  await eventually(() => px.accepted() >= before + 2, 60_000, 'both pages to reconnect');
  const missed = Array.from({ length: 5 }, (_, i) => `Carol: while you were away ${i + 1}`);
  for (const page of [alice, bob]) await page.waitForFunction(sees(missed[4]), undefined, { timeout: 60_000 });
  await say(bob, 'back');
  for (const page of [alice, bob]) await page.waitForFunction(sees('Bob: back'), undefined, WAIT);
  t.same(await messages(bob), ['Alice: hello', 'Alice: ****, the ****', 'Alice: welcome Bob', ...missed, 'Bob: back'], 'Bob: the missed messages once each, in order, then live');
  t.same(await messages(alice), ['Alice: hello', 'Alice: ****, the ****', 'Alice: welcome Bob', ...missed, 'Bob: back'], 'Alice too');
  t.notOk((await log(bob)).some((l) => l.startsWith('some messages were missed')), 'no recovery failed');
});
