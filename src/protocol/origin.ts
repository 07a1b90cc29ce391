/**
 * WebSocket Origin check against an app's `allowed_origins`.
 *
 * Pattern forms (case-insensitive; a trailing '/' is ignored):
 *   'host', 'host:port'          http and https origins of that host
 *   'https://host[:port]'        that scheme only (any scheme token works, e.g. 'capacitor://localhost')
 *   '*.domain[:port]'            any subdomain at any depth (not the bare domain), http and https
 *   'https://*.domain[:port]'    subdomains, that scheme only
 *   '*'                          everything, including a missing Origin
 *
 * Decisions:
 * - A pattern without a port matches any port of that host ('localhost' allows
 *   http://localhost:5173). A pattern with a port must match the origin's port, the
 *   scheme's default port counting when the origin gives none ('https://a.com:443'
 *   matches 'https://a.com').
 * - A missing Origin (null or '') is allowed only when the list contains '*'. Browsers
 *   always send Origin on WebSocket upgrades; only non-browser clients omit it, and a
 *   restricted app should not be reachable by sidestepping the header. Apps that want
 *   server-side clients as well use '*' (or leave the list empty: no restriction).
 * - Origins that do not parse as scheme://host[:port] (including the literal 'null' of
 *   sandboxed pages) match only '*'. Patterns that do not parse never match.
 * - Hosts are compared after WHATWG URL normalisation (lowercase, IDN → punycode).
 */

interface HostPattern {
  scheme: string | null;
  wildcard: boolean;
  host: string;
  port: string | null;
}

export type OriginMatcher = (origin: string | null) => boolean;

const DEFAULT_PORT: Record<string, string> = { http: '80', https: '443', ws: '80', wss: '443' };

/** Normalised hostname via the WHATWG URL parser, or null. */
function normHost(host: string): string | null {
  if (host === '' || /[/?#@\\*\s]/.test(host)) return null;
  try {
    return new URL('http://' + host).hostname;
  } catch {
    return null;
  }
}

function parsePattern(raw: string): HostPattern | null {
  let rest = raw.trim().toLowerCase();
  let scheme: string | null = null;
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/.exec(rest);
  if (m !== null) {
    scheme = m[1];
    rest = m[2];
  }
  if (rest.endsWith('/')) rest = rest.slice(0, -1);
  const wildcard = rest.startsWith('*.');
  if (wildcard) rest = rest.slice(2);
  let port: string | null = null;
  const pm = /:(\d{1,5})$/.exec(rest);
  if (pm !== null) {
    port = String(Number(pm[1]));
    rest = rest.slice(0, pm.index);
  }
  const host = normHost(rest);
  if (host === null) return null;
  return { scheme, wildcard, host, port };
}

interface ParsedOrigin {
  scheme: string;
  host: string;
  port: string;
}

function parseOrigin(origin: string): ParsedOrigin | null {
  if (!origin.includes('://')) return null;
  try {
    const u = new URL(origin);
    const scheme = u.protocol.slice(0, -1);
    if (u.hostname === '') return null;
    return { scheme, host: u.hostname, port: u.port !== '' ? u.port : (DEFAULT_PORT[scheme] ?? '') };
  } catch {
    return null;
  }
}

function matches(p: HostPattern, o: ParsedOrigin): boolean {
  if (p.scheme === null ? o.scheme !== 'http' && o.scheme !== 'https' : o.scheme !== p.scheme) return false;
  if (p.wildcard ? !o.host.endsWith('.' + p.host) : o.host !== p.host) return false;
  return p.port === null || p.port === o.port;
}

/** Parses the patterns once; the returned function answers per connection. */
export function compileOriginMatcher(allowed: readonly string[]): OriginMatcher {
  if (allowed.length === 0) return () => true;
  const any = allowed.some((a) => a.trim() === '*');
  if (any) return () => true;
  const patterns: HostPattern[] = [];
  for (const a of allowed) {
    const p = parsePattern(a);
    if (p !== null) patterns.push(p);
  }
  return (origin) => {
    if (origin === null || origin === '') return false;
    const o = parseOrigin(origin);
    return o !== null && patterns.some((p) => matches(p, o));
  };
}

// Config arrays are frozen: compile those once. Unfrozen arrays may change, so are compiled per call.
const cache = new WeakMap<readonly string[], OriginMatcher>();

export function originAllowed(origin: string | null, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return true;
  if (!Object.isFrozen(allowed)) return compileOriginMatcher(allowed)(origin);
  let m = cache.get(allowed);
  if (m === undefined) {
    m = compileOriginMatcher(allowed);
    cache.set(allowed, m);
  }
  return m(origin);
}
