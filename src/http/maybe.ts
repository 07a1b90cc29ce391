// Values that are ready now or later. The API answers a request inside the uWS callback
// when no step has to wait (memory or `none` rate limiter, no `info`): each `await` on a
// ready value would cost microtask hops and push the answer out of the callback (uWS then
// refuses pipelined requests behind it). docs/benchmarks.md has the numbers.

import type { MaybePromise } from '../ratelimit/types';

export type { MaybePromise };

/** `f(x)` now when `x` is ready, else once it resolves. */
export function then<T, U>(x: MaybePromise<T>, f: (v: T) => MaybePromise<U>): MaybePromise<U> {
  return x instanceof Promise ? x.then(f) : f(x);
}

/** Runs `f`; a synchronous throw becomes a rejected promise (one error path for callers). */
export function attempt<T>(f: () => MaybePromise<T>): MaybePromise<T> {
  try {
    return f();
  } catch (err) {
    return Promise.reject(err);
  }
}
