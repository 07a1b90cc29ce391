/**
 * Channel name rules (Pusher's): 1..max characters from [A-Za-z0-9_\-=@,.;], plus '#'
 * only in two reserved forms:
 *   - suffix '#cache-<ttl>' at the end of any name (ttl: positive integer seconds);
 *   - '#server-to-user-<user id>' as the whole name (user id from the same character set).
 */

export type ChannelType = 'public' | 'private' | 'presence' | 'private-encrypted';

export const SERVER_TO_USER_PREFIX = '#server-to-user-';
const CACHE_SUFFIX_RE = /#cache-(\d+)$/;
const CACHE_PREFIXES = ['cache-', 'private-cache-', 'presence-cache-', 'private-encrypted-cache-'] as const;

/** Type by prefix; 'private-encrypted-' is checked before 'private-'. */
export function channelType(name: string): ChannelType {
  if (name.startsWith('private-encrypted-')) return 'private-encrypted';
  if (name.startsWith('private-')) return 'private';
  if (name.startsWith('presence-')) return 'presence';
  return 'public';
}

export function isPresence(name: string): boolean {
  return name.startsWith('presence-');
}

/** private, private-encrypted and presence: subscribing needs an auth signature. */
export function isPrivateLike(name: string): boolean {
  return name.startsWith('private-') || name.startsWith('presence-');
}

export function isEncrypted(name: string): boolean {
  return name.startsWith('private-encrypted-');
}

/** '#server-to-user-<id>': publishing reaches every socket signed in as that user. */
export function isServerToUser(name: string): boolean {
  return name.startsWith(SERVER_TO_USER_PREFIX);
}

/** The user id of a '#server-to-user-<id>' channel, or null. */
export function serverToUserId(name: string): string | null {
  return name.startsWith(SERVER_TO_USER_PREFIX) ? name.slice(SERVER_TO_USER_PREFIX.length) : null;
}

// Allowed characters. A lookup table is cheaper than a regex per character and lets us name the bad one.
const ALLOWED = new Uint8Array(128);
for (const c of 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=@,.;') ALLOWED[c.charCodeAt(0)] = 1;

/** Index of the first character outside the allowed set in s[from, to), or -1. */
function firstInvalid(s: string, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || ALLOWED[c] !== 1) return i;
  }
  return -1;
}

/** The character (whole code point) at i, printable in a message. */
function showChar(s: string, i: number): string {
  const ch = String.fromCodePoint(s.codePointAt(i)!);
  const c = ch.codePointAt(0)!;
  // control characters and the quote shown escaped: '\n', '\u0000', '\''
  if (ch === "'") return "\\'";
  if (c < 0x20) return JSON.stringify(ch).slice(1, -1);
  // DEL, C1 controls and lone surrogates would print as nothing or garbage
  if (c === 0x7f || (c >= 0x80 && c <= 0x9f) || (c >= 0xd800 && c <= 0xdfff)) return '\\u' + c.toString(16).padStart(4, '0');
  return ch;
}

/** A positive integer TTL from the digits of a '#cache-<n>' suffix, or null. */
function parseTtl(digits: string): number | null {
  const n = Number(digits);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** null when valid, else a message saying what is wrong. */
export function validateChannelName(name: unknown, maxLength: number): string | null {
  if (typeof name !== 'string') return 'channel name must be a string';
  if (name.length === 0) return 'channel name is empty';
  if (name.length > maxLength) return `channel name is longer than ${maxLength} characters`;

  let end = name.length;
  if (name.startsWith(SERVER_TO_USER_PREFIX)) {
    const start = SERVER_TO_USER_PREFIX.length;
    if (start === end) return `channel name '${SERVER_TO_USER_PREFIX}' has no user id`;
    const bad = firstInvalid(name, start, end);
    return bad === -1 ? null : `channel name contains an invalid character '${showChar(name, bad)}' in the user id`;
  }

  const m = CACHE_SUFFIX_RE.exec(name);
  if (m !== null) {
    if (parseTtl(m[1]) === null) return `cache TTL in '#cache-${m[1]}' must be a positive integer of seconds`;
    end = m.index;
    if (end === 0) return "channel name has nothing before the '#cache-' suffix";
  }
  const bad = firstInvalid(name, 0, end);
  if (bad === -1) return null;
  if (name.charCodeAt(bad) === 35 /* # */) {
    return "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix";
  }
  return `channel name contains an invalid character '${showChar(name, bad)}'`;
}

/**
 * Cache channel TTL in seconds, or null when not a cache channel.
 * '…#cache-<n>' (n a positive integer) → n, whatever the prefix; else the prefix forms
 * 'cache-', 'private-cache-', 'presence-cache-', 'private-encrypted-cache-' → defaultTtl.
 */
export function cacheTtl(name: string, defaultTtl: number): number | null {
  const last = name.charCodeAt(name.length - 1);
  if (last >= 48 && last <= 57 /* only names ending in a digit can have the suffix */) {
    const m = CACHE_SUFFIX_RE.exec(name);
    if (m !== null) {
      const ttl = parseTtl(m[1]);
      if (ttl !== null) return ttl;
    }
  }
  for (const p of CACHE_PREFIXES) if (name.startsWith(p)) return defaultTtl;
  return null;
}

export function isCacheChannel(name: string): boolean {
  return cacheTtl(name, 1) !== null;
}

/** null when valid: a non-empty string of at most maxLength characters. */
export function validateEventName(name: unknown, maxLength: number): string | null {
  if (typeof name !== 'string') return 'event name must be a string';
  if (name.length === 0) return 'event name is empty';
  if (name.length > maxLength) return `event name is longer than ${maxLength} characters`;
  return null;
}
