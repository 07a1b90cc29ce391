// A log-linear histogram of non-negative integers (microseconds), HdrHistogram-like:
// exact below 1,024, then 512 sub-buckets per power of two (≤ 0.2 % error), up to 2^31.
// Recording is two integer ops and an array increment; histograms from several
// processes merge by adding their (sparse) bucket counts.

const LINEAR = 1024;
const SUB = 512;
const MAX_VALUE = 2 ** 31 - 1;
export const BUCKETS = LINEAR + 22 * SUB;

export function bucketOf(v: number): number {
  if (v < LINEAR) return v < 0 ? 0 : v;
  if (v > MAX_VALUE) v = MAX_VALUE;
  const shift = 31 - Math.clz32(v) - 9; // v >> shift is in [512, 1023]
  return LINEAR + (shift - 1) * SUB + ((v >>> shift) - SUB);
}

/** The lowest value that falls into bucket b. */
export function valueOf(b: number): number {
  if (b < LINEAR) return b;
  const shift = Math.floor((b - LINEAR) / SUB) + 1;
  const mant = ((b - LINEAR) % SUB) + SUB;
  return mant * 2 ** shift;
}

/** Sparse form sent between processes: [bucket, count, bucket, count, ...]. */
export type SparseHistogram = number[];

export class Histogram {
  counts = new Float64Array(BUCKETS);
  total = 0;
  max = 0;
  min = Infinity;
  sum = 0;

  record(v: number): void {
    v = Math.round(v);
    this.counts[bucketOf(v)]++;
    this.total++;
    this.sum += v;
    if (v > this.max) this.max = v;
    if (v < this.min) this.min = v;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
    this.max = 0;
    this.min = Infinity;
    this.sum = 0;
  }

  toSparse(): { buckets: SparseHistogram; max: number; min: number; sum: number } {
    const buckets: number[] = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i] !== 0) buckets.push(i, this.counts[i]);
    return { buckets, max: this.max, min: this.min, sum: this.sum };
  }

  addSparse(s: { buckets: SparseHistogram; max: number; min: number; sum: number }): void {
    for (let i = 0; i < s.buckets.length; i += 2) {
      this.counts[s.buckets[i]] += s.buckets[i + 1];
      this.total += s.buckets[i + 1];
    }
    if (s.max > this.max) this.max = s.max;
    if (s.min !== null && s.min < this.min) this.min = s.min;
    this.sum += s.sum;
  }

  /** Value at quantile q (0..1): the lower bound of the bucket holding it (max for q = 1). */
  quantile(q: number): number {
    if (this.total === 0) return NaN;
    if (q >= 1) return this.max;
    const rank = Math.ceil(q * this.total);
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= rank && this.counts[i] > 0) return Math.min(valueOf(i), this.max);
    }
    return this.max;
  }

  mean(): number {
    return this.total === 0 ? NaN : this.sum / this.total;
  }
}
