// limits/client-address.ts without sockets: which address is the client's for every shape of
// X-Forwarded-For / Forwarded a proxy (or a client forging them) sends, and
// http.trusted_proxies' config errors (an entry that is no address or range); and the
// per-address counts behind limits.max_connections_per_ip, shared by every shard.

import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config';
import { ConnectionCounters } from '../../src/channels/counters';
import { createClientAddress, normalizeAddress } from '../../src/limits/client-address';

const APP = { id: 'a', key: 'k', secret: 's' };
const h = (forwardedFor: string | null, forwarded: string | null = null) => ({ forwardedFor, forwarded });

t.test('no proxy trusted: the peer, whatever the headers say', async (t) => {
  const addr = createClientAddress([], 0);
  t.equal(addr('10.0.0.1', h('1.2.3.4')), '10.0.0.1');
  t.equal(addr('::ffff:10.0.0.1', h(null, 'for=1.2.3.4')), '10.0.0.1', 'an IPv4-mapped IPv6 peer as IPv4');
});

t.test('trusted proxies: the rightmost address that is not one of them', async (t) => {
  const addr = createClientAddress(['10.0.0.0/8', '192.168.1.10', 'fd00::/8'], 0);
  t.equal(addr('10.1.2.3', h('203.0.113.5')), '203.0.113.5');
  t.equal(addr('10.1.2.3', h('9.9.9.9, 203.0.113.5, 10.9.9.9')), '203.0.113.5', 'proxies chained; a forged entry left of the client is not read');
  t.equal(addr('192.168.1.10', h(' 203.0.113.5:4711 ')), '203.0.113.5', 'a port taken off');
  t.equal(addr('fd00::1', h('[2001:DB8::1]:443')), '2001:db8::1', 'IPv6 in brackets with a port, lower-cased');
  t.equal(addr('192.168.1.11', h('203.0.113.5')), '192.168.1.11', 'a peer outside the list: its header is ignored');
  t.equal(addr('10.1.2.3', h(null)), '10.1.2.3', 'no header: the proxy itself');
  t.equal(addr('10.1.2.3', h('10.0.0.7, 10.0.0.8')), '10.0.0.7', 'every hop trusted: the leftmost');
  t.equal(addr('10.1.2.3', h('203.0.113.5, garbage')), '10.1.2.3', 'a malformed hop ends the walk at the last trusted one');
  t.equal(addr('10.1.2.3', h(null, 'for=198.51.100.1;proto=https, for="[2001:db8::2]:80";by=10.0.0.1')), '2001:db8::2', 'Forwarded: for=');
  t.equal(addr('10.1.2.3', h(null, 'for="198.51.100.1:8080", for=10.0.0.2')), '198.51.100.1', 'Forwarded through two proxies');
  t.equal(addr('10.1.2.3', h(null, 'for=unknown')), '10.1.2.3', 'an obfuscated for= is no address');
  t.equal(addr('10.1.2.3', h('203.0.113.5', 'for=198.51.100.1')), '203.0.113.5', 'X-Forwarded-For first');
  t.equal(addr('not-an-ip', h('203.0.113.5')), 'not-an-ip');
});

t.test('rate_limiter.api.trust_hops alone (deprecated): the Nth entry from the right', async (t) => {
  const addr = createClientAddress([], 2);
  t.equal(addr('127.0.0.1', h('1.1.1.1, 2.2.2.2, 3.3.3.3')), '2.2.2.2');
  t.equal(addr('127.0.0.1', h('3.3.3.3')), '3.3.3.3', 'fewer entries: the leftmost');
  t.equal(addr('127.0.0.1', h(' , ')), '127.0.0.1', 'an empty header: the peer');
  t.equal(addr('127.0.0.1', h('nonsense')), '127.0.0.1', 'no address there: the peer');
});

t.test('normalizeAddress', async (t) => {
  t.equal(normalizeAddress('::FFFF:127.0.0.1'), '127.0.0.1');
  t.equal(normalizeAddress('FE80::1'), 'fe80::1');
  t.equal(normalizeAddress('127.0.0.1'), '127.0.0.1');
});

t.test('http.trusted_proxies: config and env, and a clear error for a bad entry', async (t) => {
  const cfg = loadConfig({ env: { HTTP_TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.10,fd00::/8' }, overrides: { apps: [APP] } });
  t.same(cfg.http.trusted_proxies, ['10.0.0.0/8', '192.168.1.10', 'fd00::/8'], 'the env var is comma-separated');
  t.same(loadConfig({ env: {}, overrides: { apps: [APP] } }).http.trusted_proxies, [], 'default: no proxy trusted');
  t.equal(loadConfig({ env: {}, overrides: { apps: [APP] } }).limits.max_connections_per_ip, 1000, 'default per-address cap');
  for (const bad of ['10.0.0.0/33', 'proxy.example', '::1/129', '10.0.0.1/x', '']) {
    let err: unknown = null;
    try {
      loadConfig({ env: {}, overrides: { apps: [APP], http: { trusted_proxies: ['10.0.0.1', bad] } } });
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof ConfigError, `${JSON.stringify(bad)} refused`);
    t.match((err as Error).message, /http\.trusted_proxies.*must be a list of IP addresses or CIDR ranges/, (err as Error).message);
  }
  let err: unknown = null;
  try {
    loadConfig({ env: {}, overrides: { apps: [APP], limits: { max_connections_per_ip: 0 } } });
  } catch (e) {
    err = e;
  }
  t.match((err as Error).message, /limits\.max_connections_per_ip/);
  t.throws(() => createClientAddress(['nope'], 0), /http\.trusted_proxies: "nope" is not an IP address/);
});

t.test('unix: connections on the Unix socket (no peer address) trusted as a proxy', async (t) => {
  const trusting = createClientAddress(['unix'], 0);
  t.equal(trusting('', h('203.0.113.5')), '203.0.113.5');
  t.equal(trusting('10.0.0.1', h('203.0.113.5')), '10.0.0.1', 'an IP peer is not trusted by `unix`');
  t.equal(createClientAddress(['10.0.0.0/8'], 0)('', h('203.0.113.5')), '', 'without `unix`: no address');
  t.same(loadConfig({ env: { HTTP_TRUSTED_PROXIES: 'unix,127.0.0.1' }, overrides: { apps: [APP] } }).http.trusted_proxies, ['unix', '127.0.0.1']);
});

t.test('the per-address counts (channels/counters.ts): shared memory, one count per address, none for no address', async (t) => {
  const sab = ConnectionCounters.allocate(2);
  const a = new ConnectionCounters(sab);
  const b = new ConnectionCounters(sab); // another shard's view of the same memory
  t.ok(a.tryAcquireAddress('1.1', '203.0.113.5', 2));
  t.ok(b.tryAcquireAddress('2.1', '203.0.113.5', 2));
  t.notOk(a.tryAcquireAddress('1.2', '203.0.113.5', 2), 'the third from the address, whichever shard');
  t.equal(b.address('203.0.113.5'), 2);
  t.ok(a.tryAcquireAddress('1.3', '203.0.113.6', 2), 'another address has its own count');
  b.releaseAddress('2.1');
  b.releaseAddress('2.1');
  a.releaseAddress('no-such-socket');
  t.equal(a.address('203.0.113.5'), 1, 'released once, by the shard that counted it');
  for (let i = 0; i < 5; i++) t.ok(a.tryAcquireAddress(`1.${10 + i}`, '', 2), 'no address (the Unix socket): never refused');
  t.equal(a.address(''), 0, 'and not counted');
});
