// Figures of one storm from the clients' per-client times, and the Markdown table.

import type { PoolResult } from './pool';
import type { StormStats } from './protocol';

export interface StormResult {
  target: string;
  round: number;
  driver: 'memory' | 'redis' | 'none';
  clients: number;
  subscriptions: number;
  rewind_clients: number;
  recover_clients: number;
  /** The first connect of every client (an idle server, no storm): all subscribed, s. */
  initial_s: number;
  /** From the stop (SIGTERM sent) to the old process gone, and to the new one answering /up (polled every 100 ms), s. */
  stopped_s: number;
  /** The old process's exit: "code/signal", e.g. "0/null" (a clean stop) or "null/SIGKILL". */
  stop_exit: string;
  ready_s: number;
  /** ready_s − stopped_s: the new process's start to /up. */
  restart_s: number;
  /** From the stop to every client connected / back with every subscription answered, s. */
  all_established_s: number;
  all_back_s: number;
  /** all_back_s − ready_s: what the restarted server took to take everyone back (ready_s is
   *  polled and may lag when the server is busy: see span_s). */
  back_after_ready_s: number;
  /** The first client connected again, and from then to the last one back: the new server's storm. */
  first_est_s: number;
  span_s: number;
  est_p50_s: number;
  est_p99_s: number;
  back_p50_s: number;
  back_p99_s: number;
  not_back: number;
  timed_out: boolean;
  attempts: number;
  failures: Record<string, number>;
  closes: Record<string, number>;
  errors: Record<string, number>;
  recovery: Record<string, number>;
  rewind_msgs_after: number;
  serial_gaps: number;
  published_msgs: number;
  received_before: number;
  clients_cpu_s: number;
}

/** The q-quantile (nearest rank) of xs, sorted in place. */
export function quantile(xs: Float64Array, q: number): number {
  if (xs.length === 0) return NaN;
  xs.sort();
  return xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))];
}

/** Seconds from t0Us of every client that got there; the count of those that did not. */
function since(ts: Float64Array, t0Us: number): { s: Float64Array; missing: number } {
  const out: number[] = [];
  for (const t of ts) if (t > 0) out.push((t - t0Us) / 1e6);
  return { s: Float64Array.from(out), missing: ts.length - out.length };
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export function stormFigures(p: PoolResult, t0Us: number): Pick<StormResult, 'all_established_s' | 'all_back_s' | 'est_p50_s' | 'est_p99_s' | 'back_p50_s' | 'back_p99_s' | 'not_back' | 'first_est_s' | 'span_s'> {
  const est = since(p.tEst, t0Us);
  const back = since(p.tBack, t0Us);
  const first = quantile(est.s, 0);
  const last = back.missing > 0 ? NaN : quantile(back.s, 1);
  return {
    first_est_s: r3(first),
    span_s: r3(last - first),
    all_established_s: r3(est.missing > 0 ? NaN : quantile(est.s, 1)),
    all_back_s: r3(back.missing > 0 ? NaN : quantile(back.s, 1)),
    est_p50_s: r3(quantile(est.s, 0.5)),
    est_p99_s: r3(quantile(est.s, 0.99)),
    back_p50_s: r3(quantile(back.s, 0.5)),
    back_p99_s: r3(quantile(back.s, 0.99)),
    not_back: back.missing,
  };
}

export function statsFields(s: StormStats): Pick<StormResult, 'attempts' | 'failures' | 'closes' | 'errors' | 'recovery' | 'rewind_msgs_after' | 'serial_gaps'> {
  return { attempts: s.attempts, failures: s.failures, closes: s.closes, errors: s.errors, recovery: s.recovery, rewind_msgs_after: s.rewindMsgs, serial_gaps: s.serialGaps };
}

const f = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '—');
const rec = (r: Record<string, number>): string => Object.entries(r).map(([k, v]) => `${k} ${v}`).join(', ') || '—';

export function table(rs: StormResult[]): string {
  const head = '| target | round | clients (rewind / recover) | first connect s | stopped s | ready s | all connected s | all back s | back after ready s | span s | back p50 / p99 s | attempts | recovery | errors |\n' +
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
  return head + rs.map((r) => `| ${r.target}${r.driver === 'redis' ? ' (redis)' : ''} | ${r.round} | ${r.clients} (${r.rewind_clients} / ${r.recover_clients}) | ${f(r.initial_s)} | ` +
    `${f(r.stopped_s)} | ${f(r.ready_s)} | ${f(r.all_established_s)} | **${f(r.all_back_s)}** | ${f(r.back_after_ready_s)} | ${f(r.span_s)} | ${f(r.back_p50_s)} / ${f(r.back_p99_s)} | ` +
    `${r.attempts} | ${rec(r.recovery)} | ${rec({ ...r.errors, ...(r.not_back > 0 ? { not_back: r.not_back } : {}) })} |`).join('\n') + '\n';
}

export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** Per target, the medians over its rounds; against the ceiling, the medians of the per-round ratios. */
export function summary(rs: StormResult[]): string {
  const targets = [...new Set(rs.map((r) => r.target))];
  const ceil = rs.filter((r) => r.target === 'ceiling');
  const ratio = (r: StormResult, k: 'all_back_s' | 'span_s' | 'restart_s'): number => {
    const c = ceil.find((x) => x.round === r.round);
    return c ? r[k] / c[k] : NaN;
  };
  let out = '| target | rounds | restart s | all back s | span s | back p99 s | ÷ ceiling: all back | ÷ ceiling: span |\n|---|---|---|---|---|---|---|---|\n';
  for (const t of targets) {
    const mine = rs.filter((r) => r.target === t);
    const m = (k: 'restart_s' | 'all_back_s' | 'span_s' | 'back_p99_s'): string => f(median(mine.map((r) => r[k])));
    const q = (k: 'all_back_s' | 'span_s'): string => (t === 'ceiling' ? '—' : `${f(median(mine.map((r) => ratio(r, k))))}×`);
    out += `| ${t} | ${mine.length} | ${m('restart_s')} | ${m('all_back_s')} | ${m('span_s')} | ${m('back_p99_s')} | ${q('all_back_s')} | ${q('span_s')} |\n`;
  }
  return out;
}
