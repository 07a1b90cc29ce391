// Who may use the console: the configured console.token (every app), or, only with
// console.allow_app_secret, an app's own secret (that app only). The browser sends
// `Authorization: Bearer <token or secret>` and, for an app secret, `X-Console-App: <app id>`.
// Compared in constant time (of digests, so that the length of the secret does not show
// either). A refusal says what was wrong, never which part of a secret.

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AppConfig } from '../config/types';

export type Grant = { all: true } | { all: false; app: string };

export interface LoginPolicy {
  token: string | null;
  allowAppSecret: boolean;
}

/** A grant, or why not (the 401's message); `attempt`: a credential was sent (a failed login, throttled). */
export type Login = { ok: true; grant: Grant } | { ok: false; error: string; attempt: boolean };

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function same(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

const refuse = (error: string, attempt = true): Login => ({ ok: false, error, attempt });

/** The login of a request. */
export function login(req: IncomingMessage, policy: LoginPolicy, apps: readonly AppConfig[]): Login {
  const auth = req.headers.authorization;
  if (auth === undefined || auth === '') return refuse('no console token: send Authorization: Bearer <console.token>', false);
  const m = /^Bearer (.+)$/.exec(auth);
  if (!m) return refuse('the Authorization header must be "Bearer <console.token>"');
  const given = m[1];
  const appHeader = req.headers['x-console-app'];
  const appId = typeof appHeader === 'string' && appHeader !== '' ? appHeader : null;
  const { token } = policy;
  if (appId === null || !policy.allowAppSecret) {
    if (token !== null && same(given, token)) return { ok: true, grant: { all: true } };
    if (appId !== null) return refuse('app secrets do not log in to this console (console.allow_app_secret is false): use the console token');
    return refuse('wrong console token');
  }
  const app = apps.find((a) => a.id === appId);
  // An unknown app id still costs one comparison: the answer time does not tell ids apart.
  const ok = same(given, app?.secret ?? token ?? '') && app !== undefined;
  if (ok) return { ok: true, grant: { all: false, app: appId } };
  if (token !== null && same(given, token)) return { ok: true, grant: { all: true } };
  return refuse('wrong console token, or wrong app id and secret');
}

/** The apps a grant may see. */
export function visible(grant: Grant, apps: readonly AppConfig[]): AppConfig[] {
  return apps.filter((a) => grant.all || a.id === grant.app);
}
