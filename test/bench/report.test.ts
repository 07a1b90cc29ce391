// The benchmark report's ratios (bench/harness/report.ts): per round, then the median.

import t from 'tap';
import { svgChart } from '../../bench/harness/chart';
import { markdownTable, roundRatio, summarise } from '../../bench/harness/report';
import type { Scenario } from '../../bench/harness/scenarios';

const sc = {
  id: 'api', title: 'api', metrics: [{ key: 'rate', label: 'req/s', better: 'higher', unit: 'rate' }],
  budgetMs: () => 0, run: async () => ({}),
} as unknown as Scenario;

const runs = (...rs: [number, number][]) => rs.map(([round, rate]) => ({ round, result: { rate } }));

t.test('ratios are taken within a round, then the median over rounds', async (t) => {
  // the machine slows down in round 2 for both; the ratio of medians mixes rounds
  const rc = summarise(sc, { name: 'ringcast-1', label: 'rc' }, runs([1, 100], [2, 50], [3, 90]), []);
  const ceil = summarise(sc, { name: 'ceiling', label: 'ceiling' }, runs([1, 100], [2, 50], [3, 100]), []);
  t.equal(roundRatio(rc, ceil, 'rate'), 1, 'rounds 1.0, 1.0, 0.9: median 1.0');
  t.equal(rc.median.rate / ceil.median.rate, 0.9, 'ratio of medians 90 / 100');
  const table = markdownTable([sc], [ceil, rc], [{ name: 'ceiling', label: 'ceiling' }, { name: 'ringcast-1', label: 'rc' }]);
  t.match(table, /ringcast-1 \/ ceiling per round \(of medians\)/);
  t.match(table, /\| 1\.00× \(0\.90×\) \|/);
});

t.test('a round one side missed is left out; no common round gives –', async (t) => {
  const rc = summarise(sc, { name: 'ringcast-1', label: 'rc' }, runs([1, 80], [3, 60]), ['run 2: failed']);
  const ceil = summarise(sc, { name: 'ceiling', label: 'ceiling' }, runs([1, 100], [2, 10]), []);
  t.equal(roundRatio(rc, ceil, 'rate'), 0.8, 'only round 1 has both');
  t.equal(rc.runs, 3);
  const lone = summarise(sc, { name: 'ceiling', label: 'ceiling' }, runs([2, 10]), []);
  t.ok(Number.isNaN(roundRatio(rc, lone, 'rate')));
  t.ok(Number.isNaN(roundRatio(rc, undefined, 'rate')));
  const table = markdownTable([sc], [lone, rc], [{ name: 'ceiling', label: 'ceiling' }, { name: 'ringcast-1', label: 'rc' }]);
  t.match(table, /\| – \(7\.00×\) \|/, 'the ratio of medians is still shown');
});

t.test('the SVG chart: one bar per target, the best one full length, values labelled', async (t) => {
  const lat = {
    id: 'latency', title: 'latency', metrics: [{ key: 'p50', label: 'p50 <b>', better: 'lower', unit: 'ms' }],
    budgetMs: () => 0, run: async () => ({}),
  } as unknown as Scenario;
  const targets = [{ name: 'ceiling', label: 'ceiling' }, { name: 'soketi', label: 'soketi' }, { name: 'ringcast-1', label: 'ringcast ×1' }];
  const one = (s: Scenario, name: string, v: Record<string, number>) => summarise(s, targets.find((x) => x.name === name)!, [{ round: 1, result: v }], []);
  const svg = svgChart([sc, lat], [
    one(sc, 'ceiling', { rate: 200 }), one(sc, 'soketi', { rate: 50 }), one(sc, 'ringcast-1', { rate: 100 }),
    one(lat, 'ceiling', { p50: 2 }), one(lat, 'soketi', { p50: 8 }), one(lat, 'ringcast-1', { p50: NaN }),
  ], targets, '2 × test cpu, node v20');
  const widths = [...svg.matchAll(/<rect x="\d+" y="\d+" width="(\d+)"/g)].map((m) => Number(m[1]));
  // api: 200, 50, 100 of 200 → 420, 105, 210; latency (lower is better): 2 → 420, 8 → 105; NaN: no bar
  t.same(widths, [420, 105, 210, 420, 105]);
  t.match(svg, /2 × test cpu, node v20/, 'the machine line');
  t.match(svg, /p50 &lt;b&gt; \(lower is better\)/, 'labels are escaped');
  t.match(svg, />200 \/s</, 'the value next to its bar');
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
});
