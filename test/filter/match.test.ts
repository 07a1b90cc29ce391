// filter/compile.ts and filter/matcher.ts: each operator's semantics, and the index against
// testing every filter (a differential check over random filters and events).
import t from 'tap';
import { compileFilter, type Tags } from '../../src/filter/compile';
import { ChannelMatcher } from '../../src/filter/matcher';
import { parseFilter, type FilterNode } from '../../src/filter/parse';
import { parseTags, serialiseTags } from '../../src/filter/tags';
import { tagsEnabled } from '../../src/filter/enable-tags';

function compile(raw: unknown) {
  const p = parseFilter(raw, 1000);
  if (!p.ok) throw new Error(p.error);
  return compileFilter(p.filter);
}

t.test('operators', async (t) => {
  const tags: Tags = { region: 'eu', price: '10', sym: 'BTC-USD', empty: '' };
  const cases: [unknown, boolean][] = [
    [{ key: 'region', cmp: 'eq', val: 'eu' }, true],
    [{ key: 'region', cmp: 'eq', val: 'EU' }, false],
    [{ key: 'region', cmp: 'neq', val: 'us' }, true],
    [{ key: 'missing', cmp: 'neq', val: 'us' }, false],
    [{ key: 'region', cmp: 'in', vals: ['us', 'eu'] }, true],
    [{ key: 'missing', cmp: 'nin', vals: ['us'] }, false],
    [{ key: 'region', cmp: 'nin', vals: ['us'] }, true],
    [{ key: 'empty', cmp: 'ex' }, true],
    [{ key: 'missing', cmp: 'nex' }, true],
    [{ key: 'constructor', cmp: 'ex' }, false],
    [{ key: 'toString', cmp: 'nex' }, true],
    [{ key: 'sym', cmp: 'sw', val: 'BTC' }, true],
    [{ key: 'sym', cmp: 'ew', val: 'usd' }, false],
    [{ key: 'sym', cmp: 'ct', val: 'C-U' }, true],
    [{ key: 'price', cmp: 'gt', val: 9.99 }, true],
    [{ key: 'price', cmp: 'gt', val: 10 }, false],
    [{ key: 'price', cmp: 'gte', val: '1e1' }, true],
    [{ key: 'price', cmp: 'lt', val: 10.01 }, true],
    [{ key: 'price', cmp: 'lte', val: 9 }, false],
    [{ key: 'sym', cmp: 'lt', val: 1e9 }, false],
    [{ key: 'empty', cmp: 'lt', val: 1 }, false],
    [{ op: 'and', nodes: [{ key: 'region', cmp: 'eq', val: 'eu' }, { key: 'price', cmp: 'lt', val: 5 }] }, false],
    [{ op: 'or', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }, { key: 'price', cmp: 'lt', val: 50 }] }, true],
    [{ op: 'not', nodes: [{ key: 'region', cmp: 'eq', val: 'us' }] }, true],
    [{ op: 'not', nodes: [{ op: 'not', nodes: [{ key: 'missing', cmp: 'ex' }] }] }, false],
  ];
  for (const [f, want] of cases) t.equal(compile(f).test(tags), want, JSON.stringify(f));
});

t.test('postings: what the index files a filter under', async (t) => {
  t.match(compile({ key: 'a', cmp: 'eq', val: '1' }), { postings: [['a', '1']], exact: true });
  t.match(compile({ key: 'a', cmp: 'in', vals: ['1', '2', '1'] }), { postings: [['a', '1'], ['a', '2']], exact: true });
  t.match(compile({ op: 'and', nodes: [{ key: 'a', cmp: 'in', vals: ['1', '2'] }, { key: 'b', cmp: 'eq', val: 'x' }, { key: 'c', cmp: 'gt', val: 1 }] }),
    { postings: [['b', 'x']], exact: false }, 'and: the narrowest child, tested');
  t.match(compile({ op: 'or', nodes: [{ key: 'a', cmp: 'eq', val: '1' }, { key: 'b', cmp: 'eq', val: '2' }] }), { postings: [['a', '1'], ['b', '2']], exact: true });
  t.match(compile({ op: 'or', nodes: [{ key: 'a', cmp: 'eq', val: '1' }, { key: 'b', cmp: 'ex' }] }), { postings: null, exact: false }, 'or with an unindexable child');
  for (const f of [{ key: 'a', cmp: 'neq', val: '1' }, { key: 'a', cmp: 'nin', vals: ['1'] }, { op: 'not', nodes: [{ key: 'a', cmp: 'eq', val: '1' }] }]) {
    t.equal(compile(f).postings, null, JSON.stringify(f));
  }
});

// ── differential: the index gives exactly the subscribers whose filter matches ──
let seed = 12345;
const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
const KEYS = ['a', 'b', 'c'];
const VALS = ['1', '2', '3', '10', 'x'];
function randomNode(depth: number): FilterNode {
  const key = KEYS[rnd(3)];
  const val = VALS[rnd(5)];
  switch (depth > 2 ? rnd(8) : rnd(11)) {
    case 0: case 1: case 2: return { op: 'cmp', cmp: 'eq', key, val };
    case 3: return { op: 'cmp', cmp: 'in', key, vals: [val, VALS[rnd(5)]] };
    case 4: return { op: 'cmp', cmp: 'neq', key, val };
    case 5: return { op: 'cmp', cmp: 'gt', key, num: rnd(12) };
    case 6: return { op: 'cmp', cmp: 'ex', key };
    case 7: return { op: 'cmp', cmp: 'nex', key };
    case 8: return { op: 'and', nodes: [randomNode(depth + 1), randomNode(depth + 1)] };
    case 9: return { op: 'or', nodes: [randomNode(depth + 1), randomNode(depth + 1), randomNode(depth + 1)] };
    default: return { op: 'not', node: randomNode(depth + 1) };
  }
}

t.test('the index matches exactly what testing every filter matches', async (t) => {
  const m = new ChannelMatcher<number>();
  const subs = Array.from({ length: 400 }, (_, i) => ({ i, filter: compileFilter(randomNode(0)) }));
  const entries = subs.map((s) => m.add(s.i, s.filter));
  // remove a quarter again: removal must leave no trace
  for (let i = 0; i < subs.length; i += 4) m.remove(entries[i]);
  const live = subs.filter((s) => s.i % 4 !== 0);
  t.equal(m.size, live.length);
  let mismatches = 0;
  for (let round = 0; round < 500; round++) {
    const tags: Record<string, string> = {};
    for (const k of KEYS) if (rnd(3) > 0) tags[k] = VALS[rnd(5)];
    const want = live.filter((s) => s.filter.test(tags)).map((s) => s.i).sort((x, y) => x - y);
    const got: number[] = [];
    m.match(tags, Object.entries(tags), (i) => got.push(i));
    got.sort((x, y) => x - y);
    if (JSON.stringify(got) !== JSON.stringify(want)) mismatches++;
  }
  t.equal(mismatches, 0, '500 random events');
  const all: number[] = [];
  m.forEach((i) => all.push(i));
  t.same(all.sort((x, y) => x - y), live.map((s) => s.i), 'forEach visits each live entry once');
  for (const [i, e] of entries.entries()) if (i % 4 !== 0) m.remove(e);
  t.equal(m.size, 0, 'empty after removing all');
});

t.test('an equality filter is not tested per event: only its bucket is visited', async (t) => {
  const m = new ChannelMatcher<number>();
  let tests = 0;
  for (let i = 0; i < 10_000; i++) {
    const f = compile({ key: 'v', cmp: 'eq', val: String(i % 100) });
    const counted = { ...f, test: (tags: Tags) => { tests++; return f.test(tags); } };
    m.add(i, counted);
  }
  let visited = 0;
  m.match({ v: '7' }, [['v', '7']], () => visited++);
  t.equal(visited, 100);
  t.equal(tests, 0, 'exact postings: no predicate runs');
});

t.test('tags: validation, sorted serialisation, parsing', async (t) => {
  t.same(serialiseTags(undefined), { ok: true, json: null });
  t.same(serialiseTags({}), { ok: true, json: null }, 'empty tags: untagged');
  t.same(serialiseTags({ z: '1', a: 'é"' }), { ok: true, json: '{"a":"é\\"","z":"1"}' });
  t.match(serialiseTags({ a: 1 }), { ok: false, error: /tags\.a must be a string/ });
  t.match(serialiseTags('x'), { ok: false, error: /object/ });
  const p = parseTags('{"__proto__":"x","b":"2"}');
  t.equal(Object.hasOwn(p.tags, '__proto__'), true, '__proto__ is an own tag');
  t.same(p.pairs, [['__proto__', 'x'], ['b', '2']]);
  t.equal(compile({ key: '__proto__', cmp: 'eq', val: 'x' }).test(p.tags), true);
});

t.test('enable_tags lookup: exact, wildcards in order, then *', async (t) => {
  const obj = (on: boolean) => ({ enabled: true, algorithm: null, conflation_key: null, max_messages_per_key: null, max_conflation_keys: null, enable_tags: on });
  const app = { channel_delta_compression: { 'px-*': obj(true), '*-sx': obj(false), exact: obj(false), 'exact-*': obj(true), '*': obj(true), str: 'Fossil' as const } };
  t.equal(tagsEnabled(app, 'px-1'), true);
  t.equal(tagsEnabled(app, 'px-1-sx'), true, 'first matching wildcard wins');
  t.equal(tagsEnabled(app, 'a-sx'), false);
  t.equal(tagsEnabled(app, 'exact'), false, 'exact before wildcards');
  t.equal(tagsEnabled(app, 'other'), true, '*');
  t.equal(tagsEnabled(app, 'str'), false, 'string form');
  t.equal(tagsEnabled({ channel_delta_compression: {} }, 'x'), false, 'nothing set');
});
