// The calls ringcast makes to an app's backend: webhook delivery (webhooks) and the
// client of the backend hooks (hook_client). The endpoints themselves are per app
// (app-schema.ts: webhooks, hooks). Composed into GlobalSchema in schema.ts.

import { Type } from '@sinclair/typebox';
import { bool, int, meta, optStr, section } from './schema-kit';
import { HEADER_NAME } from './constants';

const HEADER_RULE = 'must be an HTTP header name (letters, digits and !#$%&\'*+.^_`|~-)';

export const webhooks = section({
  batching: section({
    enabled: bool(false, { doc: 'Merge the events of one app and endpoint into one request; off: one request per event.', env: 'WEBHOOK_BATCHING_ENABLED' }),
    duration: int(50, 1, { doc: 'A batch is sent this many ms after its first event.', env: 'WEBHOOK_BATCHING_DURATION' }),
    size: int(50, 1, { doc: 'A batch of this many events is sent at once.', env: 'WEBHOOK_BATCHING_SIZE' }),
  }, 'Webhook batching.'),
  key_header: Type.String({ pattern: HEADER_NAME.source, default: 'X-Pusher-Key', ...meta({ doc: 'Header carrying the app key.', env: 'WEBHOOK_KEY_HEADER', ours: true, rule: HEADER_RULE }) }),
  signature_header: Type.String({
    pattern: HEADER_NAME.source, default: 'X-Pusher-Signature',
    ...meta({ doc: 'Header carrying the hex HMAC-SHA256 of the body with the app secret; must differ from key_header.', env: 'WEBHOOK_SIGNATURE_HEADER', ours: true, rule: HEADER_RULE }),
  }),
  timeout_ms: int(5000, 1, { doc: 'Per request (HTTP POST or Lambda invoke), ms.', env: 'WEBHOOK_TIMEOUT_MS', ours: true }),
  retry: section({
    max_retries: int(3, 0, { max: 20, doc: 'Retries after the first attempt (429/500/502/503/504, network errors, timeouts; other answers are final).', env: 'WEBHOOK_MAX_RETRIES', ours: true }),
    initial_delay_ms: int(1000, 1, { doc: 'First wait (ms), doubled each retry; ≤ max_delay_ms.', env: 'WEBHOOK_RETRY_INITIAL_DELAY_MS', ours: true }),
    max_delay_ms: int(60_000, 1, { doc: 'Cap of one wait (ms).' }),
  }, 'Webhook retries.'),
  max_queue: int(10_000, 1, { doc: 'Requests waiting (redis: to be written) past which new ones are dropped (webhooks_dropped_total).', env: 'WEBHOOK_MAX_QUEUE', ours: true }),
  concurrency: int(16, 1, { max: 1024, doc: 'Requests in flight at once.' }),
  lambda_endpoint: Type.Transform(Type.Union([Type.String({ format: 'ringcast-http-url' }), Type.Null()], {
    default: null,
    ...meta({ doc: 'lambda:// targets: another Invoke endpoint than AWS\'s (e.g. a local stand-in); null = AWS\'s regional endpoint.', env: 'WEBHOOK_LAMBDA_ENDPOINT', ours: true, rule: 'must be an http:// or https:// URL, or null' }),
  })).Decode((v) => (v === '' ? null : v)).Encode((v) => v),
}, 'Webhook delivery (apps[].webhooks lists the endpoints); the primary thread batches, signs and sends.');

export const hookClient = section({
  max_in_flight: int(1024, 1, { max: 100_000, doc: 'Backend hook calls in flight per shard, all apps together; beyond: the hook\'s on_failure policy, counted (docs/hooks.md).', ours: true }),
  max_in_flight_per_app: int(256, 1, { max: 100_000, doc: 'Backend hook calls of one app in flight per shard (within max_in_flight), so one app\'s traffic cannot take every slot; beyond: the hook\'s on_failure policy, counted (hook_failures_total{reason="overloaded"}).', ours: true }),
  calls_per_second_per_connection: int(20, 1, { max: 100_000, doc: 'Backend hook calls one connection may cause per second (bursts of as many); beyond: its subscribe or client event is refused (subscription_error AuthError 403, or pusher:error 4301) without calling, and counted in rate_limit_exceeded_total{limit_type="hook_calls"}; it never counts as a failure of the endpoint.', ours: true }),
  max_response_kb: int(64, 1, { max: 10_240, doc: 'Largest hook answer read (KiB); a bigger one is a failure.', ours: true }),
  max_pending_per_connection: int(100, 1, { max: 10_000, doc: 'Frames one connection may queue behind a pending hook call (they run in its order); beyond: the frame is dropped with pusher:error 4301.', ours: true }),
  breaker: section({
    failures: int(5, 1, { max: 10_000, doc: 'Consecutive failures of an endpoint (per app and shard: one app\'s failures never open another\'s) that open its circuit breaker: calls are answered by on_failure without calling.', ours: true }),
    open_ms: int(5000, 1, { max: 3_600_000, doc: 'ms an open breaker waits before one probe call.', ours: true }),
  }, 'The circuit breaker per hook endpoint.'),
  ca_path: optStr({ doc: 'A PEM file of CA certificates trusted for https:// hook endpoints, besides the system\'s; null = the system\'s only.', ours: true }),
}, 'The shard-side HTTP client of every app\'s backend hooks (docs/hooks.md).');
