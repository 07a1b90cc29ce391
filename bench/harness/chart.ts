// The chart `make bench` writes next to its table: one panel per scenario and metric, one
// bar per target (ringcast, soketi, the ceiling), its length the target's median relative
// to the best target of that row (so "higher is better" and "lower is better" metrics read
// the same way: the longest bar is the best), labelled with the value itself. Plain SVG,
// no dependency: a browser or GitHub shows it as it is.

import type { Scenario } from './scenarios';
import { fmt, type TargetSummary } from './report';

const ROW_H = 18;
const LABEL_W = 250;
const BAR_W = 420;
const VALUE_W = 120;
const WIDTH = LABEL_W + BAR_W + VALUE_W + 20;
const COLORS: Record<string, string> = { ceiling: '#9e9e9e', soketi: '#e8833a' };
const RINGCAST = ['#2166ac', '#4393c3', '#92c5de'];

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export function colorOf(target: string, targets: { name: string }[]): string {
  if (COLORS[target]) return COLORS[target];
  const rc = targets.filter((t) => !COLORS[t.name]).map((t) => t.name);
  return RINGCAST[Math.max(0, rc.indexOf(target)) % RINGCAST.length];
}

/**
 * The SVG of every scenario × metric with at least one finite median. `subtitle`: the
 * machine and the setup (cores, Node, runs), printed under the title.
 */
export function svgChart(scenarios: Scenario[], summaries: TargetSummary[], targets: { name: string; label: string }[], subtitle: string): string {
  const parts: string[] = [];
  let y = 56;
  for (const sc of scenarios) {
    const byTarget = new Map(summaries.filter((s) => s.scenario === sc.id).map((s) => [s.target, s]));
    for (const m of sc.metrics) {
      const vals = targets.map((t) => ({ t, v: byTarget.get(t.name)?.median[m.key] }))
        .filter((x): x is { t: { name: string; label: string }; v: number } => x.v !== undefined && Number.isFinite(x.v) && x.v > 0);
      if (vals.length === 0) continue;
      const best = m.better === 'higher' ? Math.max(...vals.map((x) => x.v)) : Math.min(...vals.map((x) => x.v));
      parts.push(`<text x="10" y="${y + 12}" class="h">${esc(sc.id)}: ${esc(m.label)} (${m.better} is better)</text>`);
      y += ROW_H + 2;
      for (const { t, v } of vals) {
        const share = m.better === 'higher' ? v / best : best / v;
        const w = Math.max(1, Math.round(share * BAR_W));
        parts.push(
          `<text x="${LABEL_W - 8}" y="${y + 13}" text-anchor="end">${esc(t.label)}</text>` +
          `<rect x="${LABEL_W}" y="${y + 2}" width="${w}" height="${ROW_H - 4}" fill="${colorOf(t.name, targets)}"/>` +
          `<text x="${LABEL_W + w + 6}" y="${y + 13}">${esc(fmt(v, m.unit))}</text>`,
        );
        y += ROW_H;
      }
      y += 10;
    }
  }
  const height = y + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    '<style>.h{font-weight:bold}.t{font-size:16px;font-weight:bold}.s{fill:#555}</style>',
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    '<text x="10" y="22" class="t">ringcast against soketi and the ceiling (bar: share of the best, longest is best)</text>',
    `<text x="10" y="40" class="s">${esc(subtitle)}</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
