// One signed hook call and the one place that turns what happened into a verdict:
//
//   call(app, hook, body) ─▶ in-flight bound ─▶ breaker of the endpoint ─▶ signed POST
//        │ over the bound: skipped (overloaded)   │ open: skipped          │ timeout, network, non-2xx,
//        ▼                                         ▼                        ▼ too large, bad JSON, no allow
//     on_failure ◀────────────────────────────────────────────────── failed ──┘
//                                                                 200 {"allow":…} ─▶ allowed / denied
//
// A call never rejects: it resolves with the verdict the connection or request acts on.
// Requests are signed as webhooks are (X-Pusher-Key, X-Pusher-Signature: hex HMAC-SHA256
// of the raw body with the app secret), so the `pusher` SDK's webhook() verifies them.

import { Attr, SpanKind, SpanStatusCode, tracing } from '../tracing/tracer';
import type { AppConfig, Config, HookKind } from '../config/types';
import { webhookSignature } from '../protocol/hmac';
import type { BoundCounter, MetricsSink } from '../metrics/types';
import type { Tap } from '../console/tap';
import { Breaker, type BreakerState } from './breaker';
import { HookCallError, type HookHttp } from './client';
import type { CompiledHook } from './settings';

/** What the connection or request knew when it asked (docs/protocol.md's request body). */
export interface HookBody {
  hook: HookKind;
  app_id: string;
  time_ms: number;
  socket_id?: string;
  user_id?: string;
  channel?: string;
  channel_data?: string;
  event?: string;
  data?: unknown;
  connection?: ConnectionInfo;
}

export interface ConnectionInfo {
  ip: string;
  origin: string | null;
  user_agent: string | null;
}

export type Verdict =
  | { allow: true; /** The replacement `data` (client_event, publish), else undefined. */ data?: unknown }
  | { allow: false; reason: string; /** false: the backend denied; true: a failure under on_failure deny. */ failed: boolean };

export type Result = 'allowed' | 'denied' | 'failed' | 'skipped';
type Reason = 'timeout' | 'network' | 'status' | 'invalid_answer' | 'too_large' | 'breaker_open' | 'overloaded' | 'cancelled' | 'internal';

export interface HookCaller {
  call(app: AppConfig, hook: CompiledHook, body: HookBody, signal?: AbortSignal): Promise<Verdict>;
  /** Calls waiting for an answer on this shard now. */
  inFlight(): number;
  close(): void;
}

export interface CallerDeps {
  config: Config;
  http: HookHttp;
  metrics: MetricsSink;
  tap?: Tap | null;
  now?: () => number;
}

/** Longest reason passed on from a backend (an error frame, an HTTP body). */
const MAX_REASON = 500;

/** The endpoint as a label: scheme, host and path (no credentials, no query). */
function endpointLabel(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return 'invalid';
  }
}

export function createHookCaller(deps: CallerDeps): HookCaller {
  const { config, http, metrics } = deps;
  const now = deps.now ?? Date.now;
  const hc = config.hook_client;
  /** By app and endpoint: one app's failing calls never open the breaker of another app on the same backend. */
  const breakers = new Map<string, Breaker>();
  /** Calls in flight per app on this shard (hook_client.max_in_flight_per_app). */
  const appInFlight = new Map<string, number>();
  const counters = new Map<string, BoundCounter>();
  const inFlightGauge = metrics.gauge('hook_calls_in_flight');
  let inFlight = 0;

  function count(name: 'hook_calls_total' | 'hook_failures_total', app: string, hook: HookKind, label: 'result' | 'reason', value: string): void {
    const key = `${name}\0${app}\0${hook}\0${value}`;
    let c = counters.get(key);
    if (c === undefined) {
      if (counters.size > 10_000) counters.clear(); // app ids come from the config; a bound all the same
      c = metrics.counter(name, { app_id: app, hook, [label]: value });
      counters.set(key, c);
    }
    c.inc();
  }

  function breakerOf(appId: string, url: string): Breaker {
    const key = appId + '\0' + url;
    let b = breakers.get(key);
    if (b === undefined) {
      const gauge = metrics.gauge('hook_breakers_open', { url: endpointLabel(url) });
      let open = false;
      b = new Breaker(hc.breaker.failures, hc.breaker.open_ms, (s: BreakerState) => {
        const nowOpen = s !== 'closed';
        if (nowOpen !== open) gauge.inc(nowOpen ? 1 : -1);
        open = nowOpen;
      });
      if (breakers.size > 10_000) breakers.clear(); // apps and URLs come from the config; a bound all the same
      breakers.set(key, b);
    }
    return b;
  }

  function report(app: AppConfig, body: HookBody, op: 'denied' | 'failed', reason: string): void {
    if (!deps.tap?.on(app.id)) return;
    deps.tap.emit({ app: app.id, kind: 'hook', op, event: body.hook, data: reason, channel: body.channel, ...(body.socket_id ? { socket_id: body.socket_id } : {}) });
  }

  /** No usable answer: the hook's on_failure decides. */
  function failed(app: AppConfig, hook: CompiledHook, body: HookBody, result: 'failed' | 'skipped', reason: Reason, detail: string): Verdict {
    count('hook_calls_total', app.id, hook.kind, 'result', result);
    count('hook_failures_total', app.id, hook.kind, 'reason', reason);
    const text = `${hook.kind} hook ${result === 'skipped' ? 'not called' : 'failed'} (${detail})`;
    report(app, body, 'failed', text);
    if (hook.on_failure === 'allow') return { allow: true };
    return { allow: false, reason: text, failed: true };
  }

  /** The answer of a 2xx, or why it is not one. */
  function verdictOf(kind: HookKind, text: string): Verdict | string {
    let a: unknown;
    try {
      a = JSON.parse(text);
    } catch {
      return 'the answer is not JSON';
    }
    if (a === null || typeof a !== 'object' || Array.isArray(a)) return 'the answer is not a JSON object';
    const { allow, reason, data } = a as { allow?: unknown; reason?: unknown; data?: unknown };
    if (typeof allow !== 'boolean') return 'the answer has no boolean "allow"';
    if (!allow) {
      const r = typeof reason === 'string' && reason.length > 0 ? reason.slice(0, MAX_REASON) : `denied by the ${kind} hook`;
      return { allow: false, reason: r, failed: false };
    }
    if (data === undefined || data === null || (kind !== 'client_event' && kind !== 'publish')) return { allow: true };
    try {
      JSON.stringify(data); // parsed JSON only fails to serialise when nested too deeply (a stack overflow later)
    } catch {
      return 'the answer\'s data is nested too deeply';
    }
    return { allow: true, data };
  }

  /** `traceparent`: the hook call's span (tracing on), passed on to the backend. */
  async function send(app: AppConfig, hook: CompiledHook, body: HookBody, signal: AbortSignal | undefined, traceparent: string | null): Promise<Verdict> {
    const breaker = breakerOf(app.id, hook.url);
    const started = now();
    let json: string;
    try {
      json = JSON.stringify(body);
    } catch {
      return failed(app, hook, body, 'failed', 'internal', 'the request body could not be serialised');
    }
    if (!breaker.admit(started)) return failed(app, hook, body, 'skipped', 'breaker_open', 'circuit breaker open');
    const headers = {
      'content-type': 'application/json',
      [config.webhooks.key_header]: app.key,
      [config.webhooks.signature_header]: webhookSignature(app.secret, json),
      ...(traceparent === null ? {} : { traceparent }),
    };
    inFlight++;
    appInFlight.set(app.id, (appInFlight.get(app.id) ?? 0) + 1);
    inFlightGauge.inc();
    let outcome: Verdict | string;
    let reason: Reason = 'invalid_answer';
    try {
      const res = await http.post(hook.url, headers, json, hook.timeout_ms, signal);
      if (res.status < 200 || res.status > 299) {
        reason = 'status';
        outcome = `status ${res.status}`;
      } else {
        outcome = verdictOf(hook.kind, res.body);
      }
    } catch (err) {
      if (!(err instanceof HookCallError)) throw err;
      if (err.reason === 'aborted') {
        breaker.release();
        count('hook_failures_total', app.id, hook.kind, 'reason', 'cancelled');
        return { allow: false, reason: 'cancelled', failed: true };
      }
      reason = err.reason;
      outcome = err.message;
    } finally {
      inFlight--;
      const n = appInFlight.get(app.id)! - 1;
      if (n === 0) appInFlight.delete(app.id);
      else appInFlight.set(app.id, n);
      inFlightGauge.dec();
      metrics.observe('hook_duration_seconds', { hook: hook.kind }, (now() - started) / 1000);
    }
    if (typeof outcome === 'string') {
      breaker.failure(now());
      return failed(app, hook, body, 'failed', reason, outcome);
    }
    breaker.success();
    count('hook_calls_total', app.id, hook.kind, 'result', outcome.allow ? 'allowed' : 'denied');
    if (!outcome.allow) report(app, body, 'denied', outcome.reason);
    return outcome;
  }

  return {
    call(app, hook, body, signal) {
      if (inFlight >= hc.max_in_flight) {
        return Promise.resolve(failed(app, hook, body, 'skipped', 'overloaded', `${hc.max_in_flight} calls already in flight on this thread`));
      }
      if ((appInFlight.get(app.id) ?? 0) >= hc.max_in_flight_per_app) {
        return Promise.resolve(failed(app, hook, body, 'skipped', 'overloaded', `${hc.max_in_flight_per_app} calls of this app already in flight on this thread`));
      }
      // A call never rejects: whatever throws on the way (a body that cannot be serialised)
      // is a failure under the hook's on_failure, not an unhandled rejection of the shard.
      const guarded = (traceparent: string | null) => send(app, hook, body, signal, traceparent).catch((err: unknown) =>
        failed(app, hook, body, 'failed', 'internal', err instanceof Error ? err.message : String(err)));
      const tr = tracing();
      if (tr === null) return guarded(null);
      return tr.around('ringcast.hook', SpanKind.CLIENT, { [Attr.AppId]: app.id, [Attr.Kind]: hook.kind, [Attr.Url]: hook.url }, async (span) => {
        const v = await guarded(tr.current());
        span.setAttribute('ringcast.hook.allowed', v.allow);
        if (!v.allow && v.failed) span.setStatus({ code: SpanStatusCode.ERROR, message: v.reason });
        return v;
      }, hook.kind !== 'publish'); // a publish's hook call: a span of the publish's trace only
    },
    inFlight: () => inFlight,
    close: () => http.close(),
  };
}
