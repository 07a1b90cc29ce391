// An entry of http.trusted_proxies: an IP address, a CIDR range, or `unix` (whatever connects
// on unix_socket.path: limits/client-address.ts).

import { isIP } from 'node:net';

/**
 * A http.trusted_proxies entry as [address, prefix], or an error text. Accepts an IPv4 or
 * IPv6 address, optionally with /prefix.
 */
export function parseCidr(entry: string): { address: string; prefix: number | null; family: 'ipv4' | 'ipv6' | 'unix' } | string {
  const s = entry.trim();
  if (s === 'unix') return { address: '', prefix: null, family: 'unix' };
  const slash = s.indexOf('/');
  const address = slash < 0 ? s : s.slice(0, slash);
  const v = isIP(address);
  if (v === 0) return `"${entry}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, 192.168.1.10, fd00::/8, unix)`;
  const family = v === 4 ? 'ipv4' : 'ipv6';
  if (slash < 0) return { address, prefix: null, family };
  const p = s.slice(slash + 1);
  const max = v === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(p) || Number(p) > max) return `"${entry}": the prefix length must be 0 to ${max}`;
  return { address, prefix: Number(p), family };
}
