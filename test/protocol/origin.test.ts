import t, { type Test } from 'tap';
import { compileOriginMatcher, originAllowed } from '../../src/protocol/origin';

function check(t: Test, patterns: string[], cases: Array<[string | null, boolean]>): void {
  for (const [origin, want] of cases) {
    t.equal(originAllowed(origin, patterns), want, `${JSON.stringify(origin)} vs ${JSON.stringify(patterns)}`);
    t.equal(originAllowed(origin, Object.freeze([...patterns])), want, 'frozen (cached) list agrees');
  }
}

t.test('empty list allows everything', async (t) => {
  check(t, [], [['https://a.com', true], [null, true], ['', true], ['garbage', true]]);
});

t.test("'*' allows everything, missing Origin included", async (t) => {
  check(t, ['*'], [['https://a.com', true], ['http://x.y:1', true], [null, true], ['', true], ['null', true]]);
  check(t, ['example.com', ' * '], [[null, true]]);
});

t.test('host (no scheme): http and https, any port', async (t) => {
  check(t, ['example.com'], [
    ['http://example.com', true], ['https://example.com', true], ['https://EXAMPLE.com', true],
    ['https://example.com:8443', true], ['http://example.com/', true],
    ['https://sub.example.com', false], ['https://example.com.evil.com', false], ['https://evilexample.com', false],
    ['ws://example.com', false], ['capacitor://example.com', false], ['example.com', false],
    [null, false], ['', false], ['null', false],
  ]);
  check(t, ['Example.COM'], [['https://example.com', true]]);
  check(t, ['localhost'], [['http://localhost:5173', true], ['http://127.0.0.1:5173', false]]);
});

t.test('host:port (no scheme): that port, default port counts', async (t) => {
  check(t, ['localhost:3000'], [
    ['http://localhost:3000', true], ['https://localhost:3000', true], ['http://localhost:3001', false], ['http://localhost', false],
  ]);
  check(t, ['example.com:443'], [['https://example.com', true], ['http://example.com', false], ['http://example.com:443', true]]);
  check(t, ['example.com:80'], [['http://example.com', true], ['https://example.com', false]]);
  check(t, ['[::1]:3000'], [['http://[::1]:3000', true], ['http://[::1]:3001', false]]);
  check(t, ['[::1]'], [['http://[::1]:9', true], ['http://[::2]', false]]);
  check(t, ['127.0.0.1:8080'], [['http://127.0.0.1:8080', true], ['http://127.0.0.1', false]]);
});

t.test('scheme://host: that scheme only', async (t) => {
  check(t, ['https://example.com'], [
    ['https://example.com', true], ['https://example.com:444', true], ['http://example.com', false],
    ['https://www.example.com', false],
  ]);
  check(t, ['http://example.com/'], [['http://example.com', true], ['https://example.com', false]]);
  check(t, ['HTTPS://Example.com:8443'], [['https://example.com:8443', true], ['https://example.com', false]]);
  check(t, ['https://example.com:443'], [['https://example.com', true], ['https://example.com:443', true]]);
  check(t, ['capacitor://localhost'], [['capacitor://localhost', true], ['http://localhost', false]]);
});

t.test('*.domain: any subdomain (any depth), not the bare domain, http and https', async (t) => {
  check(t, ['*.example.com'], [
    ['https://a.example.com', true], ['http://a.example.com', true], ['https://a.b.example.com', true],
    ['https://A.Example.com:8080', true], ['https://example.com', false], ['https://aexample.com', false],
    ['https://example.com.evil.com', false], ['https://a.example.com.evil.com', false], ['ftp://a.example.com', false],
  ]);
  check(t, ['*.example.com:8080'], [['http://a.example.com:8080', true], ['http://a.example.com', false]]);
});

t.test('scheme://*.domain: subdomains, that scheme only', async (t) => {
  check(t, ['https://*.example.com'], [
    ['https://a.example.com', true], ['http://a.example.com', false], ['https://example.com', false],
  ]);
});

t.test('several patterns, IDN, malformed input', async (t) => {
  check(t, ['https://app.com', '*.staging.app.com', 'localhost:3000'], [
    ['https://app.com', true], ['http://app.com', false], ['http://x.staging.app.com', true], ['http://localhost:3000', true],
    ['http://localhost:4000', false],
  ]);
  check(t, ['bücher.example'], [['https://xn--bcher-kva.example', true], ['https://bücher.example', true]]);
  check(t, ['', '*.', 'http://', 'exa mple.com', 'a/b', 'ex*ample.com', '**.a.com', 'a.com:port'], [
    ['https://example.com', false], ['https://a.com', false], [null, false],
  ]);
  check(t, ['example.com'], [['https://user@example.com', true], ['https://example.com:99999', false], ['https:///', false]]);
});

t.test('compiled matcher', async (t) => {
  const m = compileOriginMatcher(['*.a.com']);
  t.ok(m('https://x.a.com'));
  t.notOk(m('https://a.com'));
  t.notOk(m(null));
  t.ok(compileOriginMatcher([])(null));
});
