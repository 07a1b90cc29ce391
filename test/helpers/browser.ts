// Headless Chromium for the browser tests (Debian's `chromium`, installed by scripts/deps.sh
// for make test; CHROMIUM_PATH overrides the path), driven by playwright-core, and the small
// web server that gives their pages an origin (Chromium blocks a page of no origin, such as
// about:blank, from opening sockets to loopback).

import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import type { Test } from 'tap';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** The checkout's root (test helpers run from dist/test/helpers/). */
export const ROOT = path.resolve(__dirname, '../../..');
/** pusher-js's browser build, as a page loads it with a script tag. */
export const PUSHER_JS_WEB = path.join(ROOT, 'node_modules/pusher-js/dist/web/pusher.js');

/** Launches Chromium, closed at the test's teardown; a missing binary is an error that names it. */
export async function launchChromium(t: Test): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: scripts/deps.sh (make deps) installs Debian's chromium, or set CHROMIUM_PATH`);
  // root in the test container: Chromium's sandbox needs a user namespace it may not get
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] });
  t.teardown(() => browser.close());
  return browser;
}

/** A file from disk, a fixed text, or a handler given the request and its body. */
export type Route =
  | { file: string; type: string }
  | { text: string; type: string }
  | ((req: http.IncomingMessage, res: http.ServerResponse, body: string) => void);

/**
 * Serves `routes` (by path, without the query; '*' answers every other path) on 127.0.0.1,
 * closed at the test's teardown. Resolves with the site's base URL (`http://127.0.0.1:P/`).
 */
export async function serveSite(t: Test, routes: Record<string, Route>): Promise<string> {
  const srv = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { body += c; });
    req.on('end', () => {
      const route = routes[(req.url ?? '/').split('?')[0]] ?? routes['*'];
      if (route === undefined) res.writeHead(404).end();
      else if (typeof route === 'function') route(req, res, body);
      else res.writeHead(200, { 'content-type': route.type }).end('file' in route ? fs.readFileSync(route.file) : route.text);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { srv.closeAllConnections(); srv.close(() => r()); }));
  return `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/`;
}
