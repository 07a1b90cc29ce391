// deepFreeze on its own, so that threads that only freeze a config they were handed (the
// shards, the delta thread) do not load the loader and its schema library.

/** Freezes an object graph in place and returns it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
