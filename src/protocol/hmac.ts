/**
 * Signatures: lowercase hex HMAC-SHA256 keyed with the app secret (Pusher's scheme).
 * Verified against Pusher's published vectors and the `pusher` SDK in test/protocol/hmac.test.ts.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export function hmacSha256Hex(secret: string, data: string): string {
  return createHmac('sha256', secret).update(data, 'utf8').digest('hex');
}

export function md5Hex(data: string | Buffer): string {
  return createHash('md5').update(data).digest('hex');
}

/** Constant-time string compare (leaks only whether the lengths differ). */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  if (ab.length !== bb.length) return false;
  return timingSafeEqual(ab, bb);
}

/** Channel auth value `${key}:${hmac(secret, socketId:channel[:channelData])}`. */
export function channelAuth(key: string, secret: string, socketId: string, channel: string, channelData?: string): string {
  const data = channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
  return `${key}:${hmacSha256Hex(secret, data)}`;
}

/** Compares the whole `key:signature` in constant time; non-strings are refused. */
export function verifyChannelAuth(auth: unknown, key: string, secret: string, socketId: string, channel: string, channelData?: string): boolean {
  if (typeof auth !== 'string') return false;
  return safeEqual(auth, channelAuth(key, secret, socketId, channel, channelData));
}

/** pusher:signin auth value: `${key}:${hmac(secret, socketId::user::userData)}`. */
export function userAuth(key: string, secret: string, socketId: string, userData: string): string {
  return `${key}:${hmacSha256Hex(secret, `${socketId}::user::${userData}`)}`;
}

export function verifyUserAuth(auth: unknown, key: string, secret: string, socketId: string, userData: string): boolean {
  if (typeof auth !== 'string') return false;
  return safeEqual(auth, userAuth(key, secret, socketId, userData));
}

/** Webhook `X-Pusher-Signature`: hex HMAC-SHA256 of the raw body. */
export function webhookSignature(secret: string, body: string): string {
  return hmacSha256Hex(secret, body);
}
