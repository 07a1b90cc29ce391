// One webhook request, one attempt: an HTTP POST (http.ts, with a per-request timeout)
// or a Lambda invoke (lambda.ts), classified for the retry policy
// of the spec: 429/500/502/503/504 and network errors are retried; every other answer
// (400/401/404 and the rest of 4xx, other statuses) is final.

import type { Config } from '../config/types';
import { webhookSignature } from '../protocol/hmac';
import { TimeoutError, type HttpPoster } from './http';
import type { LambdaInvoker } from './lambda';
import { RETRY_STATUSES, type Outcome } from './outcome';
import { Attr, SpanKind, SpanStatusCode, tracing } from '../tracing/tracer';

export { RETRY_STATUSES, type Outcome };

/** A request ready to send: the body is signed as is. */
export interface Job {
  app: string;
  /** The endpoint's URL (http(s):// or lambda://arn). */
  url: string;
  body: string;
  /** Names of the events in the body (for the final-failure log line). */
  events: string[];
}


/** Wait before retry n (1-based): initial × 2^(n-1), capped (1, 2, 4 s by default). */
export function retryDelay(n: number, retry: Config['webhooks']['retry']): number {
  return Math.min(retry.max_delay_ms, retry.initial_delay_ms * 2 ** (n - 1));
}

export interface SendDeps {
  cfg: Config['webhooks'];
  /** App key and secret by app id (null: the app is gone from the configuration). */
  credentials(app: string): { key: string; secret: string } | null;
  /** The endpoint's custom headers (null: it is gone from the app's configuration). */
  headers(app: string, url: string): Readonly<Record<string, string>> | null;
  lambda: LambdaInvoker;
  http: HttpPoster;
}

/** One attempt; with tracing on, in a client span whose context the request carries (`traceparent`). */
export function attempt(job: Job, deps: SendDeps): Promise<Outcome> {
  const tr = tracing();
  if (tr === null) return send(job, deps, null);
  return tr.around('ringcast.webhook', SpanKind.CLIENT, { [Attr.AppId]: job.app, [Attr.Url]: job.url, 'ringcast.webhook.events': job.events }, async (span) => {
    const out = await send(job, deps, tr.current());
    if (out.status !== undefined) span.setAttribute(Attr.Status, out.status);
    if (!out.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: out.reason });
    return out;
  });
}

async function send(job: Job, deps: SendDeps, traceparent: string | null): Promise<Outcome> {
  const cred = deps.credentials(job.app);
  const custom = deps.headers(job.app, job.url);
  if (!cred || !custom) return { ok: false, retry: false, reason: 'config', error: 'app or endpoint no longer configured' };
  if (job.url.startsWith('lambda://')) return deps.lambda.invoke(job.url.slice('lambda://'.length), job.body);
  const headers: Record<string, string> = {
    ...custom,
    'content-type': 'application/json',
    [deps.cfg.key_header]: cred.key,
    // hex HMAC-SHA256 of the raw body with the app secret: what pusher's webhook() checks
    [deps.cfg.signature_header]: webhookSignature(cred.secret, job.body),
    ...(traceparent === null ? {} : { traceparent }),
  };
  try {
    const status = await deps.http.post(job.url, headers, job.body);
    if (status >= 200 && status < 300) return { ok: true, status };
    return { ok: false, retry: RETRY_STATUSES.has(status), reason: 'status', status };
  } catch (err) {
    const e = err as Error & { code?: string };
    return { ok: false, retry: true, reason: e instanceof TimeoutError ? 'timeout' : 'network', error: e.code ?? e.message };
  }
}
