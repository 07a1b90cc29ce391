// What a fuzz test collects while it runs: problems (capped) and tallies to print at the end.

export class FuzzReport {
  readonly problems: string[] = [];

  problem(p: string): void {
    if (this.problems.length < 1000) this.problems.push(p);
  }

  count(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  /** "key: n, …" sorted by key, or by count (largest first) with byCount. */
  summary(m: Map<string, number>, byCount = false): string {
    const rows = [...m].sort(byCount ? (a, b) => b[1] - a[1] : (a, b) => (a[0] < b[0] ? -1 : 1));
    return rows.map(([k, v]) => `${k}: ${v}`).join(', ') || 'none';
  }
}
