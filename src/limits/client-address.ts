// The address of the client behind a request: the peer's, or, when the peer is one of
// http.trusted_proxies, the one those proxies say they saw (X-Forwarded-For, else the
// Forwarded header's for=). Per-address limits, hooks, the API's per-IP window, the
// console's login throttle and logs all use this one answer (docs/security.md,
// "Client addresses behind a proxy").
//
// The chain is walked from the right: the peer, then each X-Forwarded-For entry from the
// last one (the address the nearest proxy saw) leftwards, while the address in hand is a
// trusted proxy. The first untrusted address is the client; entries to its left are the
// client's to forge and never read. A malformed entry ends the walk at the last trusted hop.
//
// A connection on the Unix socket has no address (''): `unix` in the list trusts it as a
// proxy; otherwise its clients have no address, and no per-address cap applies to them.
//
// rate_limiter.api.trust_hops (deprecated) still applies when http.trusted_proxies is
// empty: the Nth entry from the right of X-Forwarded-For, whoever the peer is.

import { BlockList, isIP } from 'node:net';
import { parseCidr } from '../config/cidr';

export interface AddressHeaders {
  forwardedFor: string | null;
  forwarded: string | null;
}

export type ClientAddress = (peer: string, headers: AddressHeaders) => string;

/** "::ffff:1.2.3.4" → "1.2.3.4"; IPv6 lower-cased; anything else as given. */
export function normalizeAddress(a: string): string {
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(a);
  if (m !== null) return m[1];
  return a.includes(':') ? a.toLowerCase() : a;
}

/** One hop as a proxy wrote it: quotes, [brackets] and a :port taken off; null if it is no IP address. */
function hopAddress(raw: string): string | null {
  let s = raw.trim();
  if (s.startsWith('"') && s.endsWith('"') && s.length >= 2) s = s.slice(1, -1);
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return null;
    s = s.slice(1, end);
  } else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d+$/.test(s)) {
    s = s.slice(0, s.lastIndexOf(':'));
  }
  return isIP(s) === 0 ? null : normalizeAddress(s);
}

/** The hops of a Forwarded header, left to right (their for= values). */
function forwardedHops(h: string): string[] {
  const hops: string[] = [];
  for (const element of h.split(',')) {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq > 0 && pair.slice(0, eq).trim().toLowerCase() === 'for') hops.push(pair.slice(eq + 1));
    }
  }
  return hops;
}

export function createClientAddress(trusted: readonly string[], trustHops: number): ClientAddress {
  if (trusted.length === 0) {
    if (trustHops <= 0) return (peer) => normalizeAddress(peer);
    // deprecated: rate_limiter.api.trust_hops alone
    return (peer, h) => {
      const parts = (h.forwardedFor ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
      if (parts.length === 0) return normalizeAddress(peer);
      return hopAddress(parts[Math.max(0, parts.length - trustHops)]) ?? normalizeAddress(peer);
    };
  }
  const list = new BlockList();
  let unix = false;
  for (const entry of trusted) {
    const c = parseCidr(entry);
    if (typeof c === 'string') throw new RangeError(`http.trusted_proxies: ${c}`);
    if (c.family === 'unix') unix = true;
    else if (c.prefix === null) list.addAddress(c.address, c.family);
    else list.addSubnet(c.address, c.prefix, c.family);
  }
  const isTrusted = (a: string) => list.check(a, a.includes(':') ? 'ipv6' : 'ipv4');
  return (peer, h) => {
    let current = normalizeAddress(peer);
    // a peer with no IP address is on the Unix socket: trusted when `unix` is listed
    if (isIP(current) === 0 ? !unix : !isTrusted(current)) return current;
    const hops = h.forwardedFor !== null && h.forwardedFor.trim() !== '' ? h.forwardedFor.split(',') : h.forwarded !== null ? forwardedHops(h.forwarded) : [];
    for (let i = hops.length - 1; i >= 0; i--) {
      const next = hopAddress(hops[i]);
      if (next === null) return current;
      current = next;
      if (!isTrusted(current)) return current;
    }
    return current; // every hop a trusted proxy: the leftmost
  };
}

interface AddressConfig {
  http: { trusted_proxies: readonly string[] };
  rate_limiter: { api: { trust_hops: number } };
}

const resolvers = new WeakMap<AddressConfig, ClientAddress>();

/** The resolver of a config (made once per config object: a reload's new config gets its own). */
export function clientAddressOf(config: AddressConfig): ClientAddress {
  let r = resolvers.get(config);
  if (r === undefined) resolvers.set(config, (r = createClientAddress(config.http.trusted_proxies, config.rate_limiter.api.trust_hops)));
  return r;
}
