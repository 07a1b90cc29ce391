// Medians over runs, the JSON line per scenario/target, and the final Markdown table.

import type { MetricDef, Result, Scenario } from './scenarios';

export interface TargetSummary {
  scenario: string;
  target: string;
  label: string;
  runs: number;
  ok_runs: number;
  median: Result;
  per_run: Result[];
  /** The round (1-based) of each entry of per_run: runs of one round ran seconds apart. */
  rounds: number[];
  errors: string[];
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 === 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Median of every numeric field over the runs (each field on its own). */
export function medians(runs: Result[]): Result {
  const keys = new Set<string>();
  for (const r of runs) for (const k of Object.keys(r)) keys.add(k);
  const out: Result = {};
  for (const k of keys) out[k] = median(runs.map((r) => r[k]));
  return out;
}

export function summarise(scenario: Scenario, target: { name: string; label: string }, runs: { round: number; result: Result }[], errors: string[]): TargetSummary {
  return {
    scenario: scenario.id, target: target.name, label: target.label,
    runs: runs.length + errors.length, ok_runs: runs.length,
    median: medians(runs.map((r) => r.result)), per_run: runs.map((r) => r.result), rounds: runs.map((r) => r.round), errors,
  };
}

/** One JSON line; NaN/Infinity become null. */
export function jsonLine(s: TargetSummary): string {
  return JSON.stringify(s, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v));
}

export function fmt(v: number | undefined, unit: MetricDef['unit']): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  switch (unit) {
    case 'rate':
      if (v >= 1e6) return `${(v / 1e6).toFixed(2)} M/s`;
      if (v >= 1e4) return `${(v / 1e3).toFixed(1)} k/s`;
      return `${v.toFixed(v >= 100 ? 0 : 1)} /s`;
    case 'ms':
      return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toPrecision(3)} ms`;
    case 's':
      return `${v.toPrecision(3)} s`;
    case 'kb':
      return `${v.toPrecision(3)} KiB`;
    case 'us':
      return `${v.toPrecision(3)} µs`;
    case 'ratio':
      return v.toFixed(2);
  }
}

/**
 * The median over rounds of a's value ÷ b's in the same round (rounds where both ran);
 * NaN when no round has both.
 */
export function roundRatio(a: TargetSummary | undefined, b: TargetSummary | undefined, key: string): number {
  if (!a || !b) return NaN;
  const ratios: number[] = [];
  a.rounds.forEach((round, i) => {
    const j = b.rounds.indexOf(round);
    const x = a.per_run[i][key];
    const y = j < 0 ? NaN : b.per_run[j][key];
    if (Number.isFinite(x) && Number.isFinite(y) && y !== 0) ratios.push(x / y);
  });
  return median(ratios);
}

/** "median of per-round ratios (ratio of the medians)", e.g. "1.01× (0.85×)". */
function ratioCell(a: TargetSummary | undefined, b: TargetSummary | undefined, key: string): string {
  const x = a?.median[key];
  const y = b?.median[key];
  const ofMedians = x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y) || y === 0 ? NaN : x / y;
  const perRound = roundRatio(a, b, key);
  const show = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '–');
  return Number.isFinite(perRound) || Number.isFinite(ofMedians) ? `${show(perRound)} (${show(ofMedians)})` : '–';
}

/**
 * | scenario | metric | <targets…> | ringcast-N / soketi | ringcast-N / ceiling |
 * Ratios are ringcast ÷ other for every metric: above 1 is better for "higher" metrics,
 * below 1 is better for "lower" ones (the metric column says which). Each cell gives the
 * median of the per-round ratios (the two runs seconds apart) and, in brackets, the
 * ratio of the two medians (runs minutes apart when the machine's speed drifts).
 */
export function markdownTable(scenarios: Scenario[], summaries: TargetSummary[], targets: { name: string; label: string }[]): string {
  const rc = targets.filter((t) => t.name.startsWith('ringcast'));
  const others = ['soketi', 'ceiling'].filter((n) => targets.some((t) => t.name === n));
  const head = ['scenario', 'metric', ...targets.map((t) => t.label)];
  for (const o of others) for (const r of rc) head.push(`${r.name} / ${o} per round (of medians)`);
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const sc of scenarios) {
    const byTarget = new Map(summaries.filter((s) => s.scenario === sc.id).map((s) => [s.target, s]));
    if (byTarget.size === 0) continue;
    for (const m of sc.metrics) {
      const val = (t: string): number | undefined => byTarget.get(t)?.median[m.key];
      const row = [sc.id, `${m.label} (${m.better} is better)`, ...targets.map((t) => fmt(val(t.name), m.unit))];
      for (const o of others) for (const r of rc) row.push(ratioCell(byTarget.get(r.name), byTarget.get(o), m.key));
      lines.push(`| ${row.join(' | ')} |`);
    }
  }
  return lines.join('\n');
}
