/**
 * Outgoing frame builders. String concatenation with JSON.stringify for the dynamic
 * parts only: no intermediate object, fixed key order (event, channel, data), which
 * delta compression relies on (a delta turns one envelope into the next byte for byte).
 */
import type { SubscriptionErrorType } from './codes';

/**
 * {"event":E,"channel":C,"data":D}. `data` is kept as is: a string stays a JSON string
 * value, an object stays an object. `channel` omitted when undefined; `data` omitted
 * when undefined (e.g. pusher:cache_miss).
 */
export function frame(event: string, data: unknown, channel?: string): string {
  let s = '{"event":' + JSON.stringify(event);
  if (channel !== undefined) s += ',"channel":' + JSON.stringify(channel);
  if (data !== undefined) s += ',"data":' + JSON.stringify(data);
  return s + '}';
}

/** {"event":E,"channel"?:C,"data":{"code":N|null,"message":M}}; `event` is already prefixed. */
export function errorFrame(event: string, code: number | null, message: string, channel?: string): string {
  let s = '{"event":' + JSON.stringify(event);
  if (channel !== undefined) s += ',"channel":' + JSON.stringify(channel);
  return s + ',"data":{"code":' + JSON.stringify(code) + ',"message":' + JSON.stringify(message) + '}}';
}

/** {"event":E,"channel":C,"data":{"type":T,"error":M,"status":S}} — pusher:subscription_error. */
export function subscriptionErrorFrame(event: string, channel: string, type: SubscriptionErrorType, error: string, status: number): string {
  return (
    '{"event":' + JSON.stringify(event) + ',"channel":' + JSON.stringify(channel) +
    ',"data":{"type":"' + type + '","error":' + JSON.stringify(error) + ',"status":' + JSON.stringify(status) + '}}'
  );
}
