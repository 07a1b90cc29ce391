// filter/parse.ts: the validation of a subscribe's `filter`, and numeric parsing.
import t from 'tap';
import { parseFilter, parseNumber } from '../../src/filter/parse';

t.test('parseNumber reads decimals only', async (t) => {
  const ok: [string, number][] = [['0', 0], ['10', 10], ['-3', -3], ['+4', 4], ['20.5', 20.5], ['.5', 0.5], ['5.', 5], ['1e1', 10], ['-2.5E-1', -0.25], ['007', 7]];
  for (const [s, n] of ok) t.equal(parseNumber(s), n, JSON.stringify(s));
  for (const s of ['', ' 1', '1 ', '0x10', 'Infinity', '-Infinity', 'NaN', '1e', 'e1', '.', '-', '1,5', '1_000', '1e400', '--1', 'abc']) {
    t.equal(parseNumber(s), null, `${JSON.stringify(s)} is not a number`);
  }
});

t.test('short and long spellings parse to the same node', async (t) => {
  const pairs: [string, string][] = [['ex', 'exists'], ['nex', 'notExists'], ['sw', 'startsWith'], ['ew', 'endsWith'], ['ct', 'contains']];
  for (const [short, long] of pairs) {
    const val = short === 'ex' || short === 'nex' ? {} : { val: 'x' };
    const a = parseFilter({ key: 'k', cmp: short, ...val }, 50);
    const b = parseFilter({ key: 'k', cmp: long, ...val }, 50);
    t.ok(a.ok && b.ok, `${short} / ${long}`);
    t.same(a, b, `${long} is ${short}`);
  }
  t.match(parseFilter({ key: 'p', cmp: 'gt', val: '1.5' }, 50), { ok: true, filter: { cmp: 'gt', num: 1.5 } }, 'numeric string value');
  t.match(parseFilter({ key: 'p', cmp: 'lte', val: -2 }, 50), { ok: true, filter: { cmp: 'lte', num: -2 } }, 'number value');
  t.match(parseFilter({ op: 'not', nodes: [{ key: 'a', cmp: 'eq', val: '' }] }, 50), { ok: true, nodes: 2 });
});

t.test('node counting and limits', async (t) => {
  const leaf = { key: 'a', cmp: 'ex' };
  t.match(parseFilter({ op: 'and', nodes: [leaf, leaf] }, 3), { ok: true, nodes: 3 });
  t.match(parseFilter({ op: 'and', nodes: [leaf, leaf, leaf] }, 3), { ok: false, error: /more than 3 nodes/ });
  // deep nesting under a large cap: refused, never a stack overflow
  let deep: unknown = leaf;
  for (let i = 0; i < 200_000; i++) deep = { op: 'not', nodes: [deep] };
  t.match(parseFilter(deep, 1_000_000), { ok: false, error: /nested too deeply|more than/ });
  t.match(parseFilter(deep, 50), { ok: false, error: /more than 50 nodes/ });
});

t.test('bad filters name what is wrong', async (t) => {
  const bad: [unknown, RegExp][] = [
    [null, /filter must be an object/],
    [5, /filter must be an object/],
    [{ op: 'and', nodes: [{ key: 'a', cmp: 'ex' }, 7] }, /filter\.nodes\[1\] must be an object/],
    [{ op: 'and', key: 'a', nodes: [{ key: 'a', cmp: 'ex' }] }, /unknown field "key"/],
    [{ op: 'not', nodes: [] }, /exactly one node, got 0/],
    [{ key: 'a' }, /cmp must be one of/],
    [{ key: 'a', cmp: 'toString' }, /cmp must be one of .*not "toString"/],
    [{ key: 'a', cmp: 'eq', vals: ['x'] }, /takes "val", not "vals"/],
    [{ key: 'a', cmp: 'sw', val: 1 }, /val must be a string for "sw"/],
    [{ key: 'a', cmp: 'gt', val: Infinity }, /must be a number/],
    [{ key: 'a', cmp: 'gt', val: null }, /must be a number/],
    [{ key: 1, cmp: 'eq', val: 'x' }, /key must be a non-empty string/],
    [{ cmp: 'eq', val: 'x' }, /key must be a non-empty string/],
  ];
  for (const [f, re] of bad) t.match(parseFilter(f, 50), { ok: false, error: re }, JSON.stringify(f));
});
