// How deep a parsed JSON value nests, measured without recursion (a value of tens of
// thousands of levels parses fine but overflows the stack of every recursive walk after
// it: JSON.stringify, a hook's request body). Stops as soon as the bound is passed.

/** True when `v` nests more than `max` levels (an array or object is one level; a scalar none). */
export function nestedDeeperThan(v: unknown, max: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  const values: object[] = [v];
  const depths: number[] = [1];
  while (values.length > 0) {
    const o = values.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return true;
    const items = Array.isArray(o) ? o : Object.values(o);
    for (let i = 0; i < items.length; i++) {
      const x: unknown = items[i];
      if (x !== null && typeof x === 'object') {
        values.push(x);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
