// A shard's side of the data plane by interest (adapter/buckets.ts): the first subscriber
// of a bucket on this node waits for the node's backend subscription of that bucket
// before it is told subscription_succeeded, so every publish accepted after that, on any
// node, reaches it. Later subscribers of the bucket pass at once (ready[b] is 1).
//
// The caller sets its interest bit before after() reads ready[b] (the order the primary's
// unsubscribe mirrors). A wait is bounded by BUCKET_WAIT_MS: with the backend down the
// subscription goes on (local publishes reach it; remote ones come once the backend is
// back and the bucket subscribed, like every remote publish of an outage).

import { bucketOf } from './interest';

/** The longest a first subscriber of a bucket waits for the backend's acknowledgement. */
export const BUCKET_WAIT_MS = 2000;

export interface BucketGate {
  /** Runs `then` once the channel's bucket is subscribed on the backend (at once when it is). */
  after(app: string, channel: string, then: () => void): void;
}

export function createBucketGate(deps: {
  ready: SharedArrayBuffer;
  buckets: number;
  /** Asks the primary to subscribe bucket b; settles once it is (or it failed). */
  request(b: number): Promise<unknown>;
}): BucketGate {
  const ready = new Int32Array(deps.ready);
  /** Requests in flight, per bucket: the subscribers of one bucket share one. */
  const waiting = new Map<number, Promise<void>>();

  function ask(b: number): Promise<void> {
    let p = waiting.get(b);
    if (p) return p;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, BUCKET_WAIT_MS); });
    p = Promise.race([deps.request(b).then(() => undefined, () => undefined), bound]).finally(() => {
      clearTimeout(timer);
      waiting.delete(b);
    });
    waiting.set(b, p);
    return p;
  }

  return {
    after(app, channel, then) {
      const b = bucketOf(app, channel, deps.buckets);
      if (Atomics.load(ready, b) === 1) return then();
      void ask(b).then(then);
    },
  };
}
