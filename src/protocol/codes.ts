/**
 * Wire codes, in one place. Handlers name these (`ErrorCode.OverQuota`), never `4004`.
 *
 * pusher-js reads the close-code ranges as: 4000–4099 "do not reconnect",
 * 4100–4199 "back off, then reconnect", 4200–4299 "reconnect at once".
 * A code must only be used with the meaning of its range.
 */
export const ErrorCode = {
  Malformed: 4000,
  AppNotFound: 4001,
  AppDisabled: 4003,
  OverQuota: 4004,
  Unauthorized: 4009,
  OverCapacity: 4100,
  ShuttingDown: 4200,
  PongTimeout: 4201,
  ClientEventRefused: 4301,
  /** Over rate_limiter.websocket (frames per window): error frame, frame dropped, stays open. */
  RateLimited: 4301,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Standard WebSocket close codes we use (RFC 6455 §7.4.1). */
export const WsClose = {
  Normal: 1000,
  GoingAway: 1001,
  MessageTooBig: 1009,
} as const;

/**
 * Generic human messages per code (error frame `message` and close reason).
 * Close reasons must stay under 123 bytes; these are all ASCII and short.
 * 4009's text is fixed by the spec for the origin case.
 */
export const CloseMessage: Readonly<Record<number, string>> = Object.freeze({
  [ErrorCode.Malformed]: 'Invalid message format',
  [ErrorCode.AppNotFound]: 'App key does not exist',
  [ErrorCode.AppDisabled]: 'Application is disabled',
  [ErrorCode.OverQuota]: 'Application is over its connection quota',
  [ErrorCode.Unauthorized]: 'Origin not allowed',
  [ErrorCode.OverCapacity]: 'Over capacity',
  [ErrorCode.ShuttingDown]: 'Server is shutting down',
  [ErrorCode.PongTimeout]: 'Pong reply not received',
  [ErrorCode.ClientEventRefused]: 'Client event rejected',
});

/** `type` of a `pusher:subscription_error`; the connection stays open. */
export type SubscriptionErrorType = 'AuthError' | 'LimitReached' | 'InvalidChannel' | 'InvalidFilter' | 'InvalidDelta';

/** `status` that goes with each subscription error (see docs/protocol.md, "Error codes"). */
export const SubscriptionStatus = {
  /** AuthError: bad or missing auth. */
  AuthFailed: 401,
  /** LimitReached: presence channel has max members. */
  MemberLimit: 4100,
  /** LimitReached: the connection is at limits.max_subscriptions_per_connection or max_filter_values_per_connection. */
  ConnectionLimit: 4100,
  /** LimitReached: presence member data too large. */
  MemberSize: 4301,
  /** LimitReached: channel name too long. */
  NameLength: 4009,
  /** InvalidChannel. */
  InvalidChannel: 4009,
  /** InvalidFilter. */
  InvalidFilter: 4000,
  /** InvalidDelta: a subscription's `delta` is not one of the accepted forms. */
  InvalidDelta: 4000,
} as const;
