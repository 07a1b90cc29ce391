// examples/chat-server.ts in headless Chromium (Debian `chromium`, driven by
// playwright-core; scripts/deps.sh installs it, and its absence fails the test): two pages join presence-chat, see each other in
// the member list, see each other type (client events) and chat (messages published by
// the example's backend with the `pusher` SDK).

import fs from 'node:fs';
import t from 'tap';
import type { Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from '../helpers/browser';
import { startChatServer } from '../../examples/chat-server';
import { APP, startServer } from '../helpers/server';

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
