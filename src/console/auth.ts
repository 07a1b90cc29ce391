// Who may use the console: the configured console.token (every app), or an app's own
// secret (that app only). The browser sends `Authorization: Bearer <token or secret>` and,
// for an app secret, `X-Console-App: <app id>`. Compared in constant time (of digests, so
// that the length of the secret does not show either).

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AppConfig } from '../config/types';

export type Grant = { all: true } | { all: false; app: string };

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function same(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** The grant of a request, or null (401). */
export function grantOf(req: IncomingMessage, token: string | null, apps: readonly AppConfig[]): Grant | null {
  const auth = req.headers.authorization ?? '';
  const m = /^Bearer (.+)$/.exec(auth);
  if (!m) return null;
  const given = m[1];
  const appHeader = req.headers['x-console-app'];
  const appId = typeof appHeader === 'string' && appHeader !== '' ? appHeader : null;
  if (appId === null) return token !== null && same(given, token) ? { all: true } : null;
  const app = apps.find((a) => a.id === appId);
  // An unknown app id still costs one comparison: the answer time does not tell ids apart.
  const ok = same(given, app?.secret ?? token ?? '') && app !== undefined;
  if (ok) return { all: false, app: appId };
  return token !== null && same(given, token) ? { all: true } : null;
}

/** The apps a grant may see. */
export function visible(grant: Grant, apps: readonly AppConfig[]): AppConfig[] {
  return apps.filter((a) => grant.all || a.id === grant.app);
}
