// The delta encoders. Loaded only off the shards (the sequencer thread or its piscina
// pool): vcdiff-wasm's emscripten glue installs process-wide rethrowing
// uncaughtException / unhandledRejection handlers when it loads, which a shard must not
// have (its crash handling, shard/failover.ts, owns those events).

import { fossilDelta } from './fossil';
import type { Algo } from './settings';
import { toStandardVcdiff } from './vcdiff';

export type Encode = (base: Uint8Array, target: Uint8Array) => Uint8Array;

type EncoderModule = (() => Promise<Encode>) | { default: () => Promise<Encode> };

let xdelta: Promise<Encode> | null = null;

/** The VCDIFF encoder (open-vcdiff in wasm), its output rewritten to standard RFC 3284. */
function loadXdelta(): Promise<Encode> {
  xdelta ??= (async () => {
    const mod = (await import('vcdiff-wasm/encoder')) as unknown as EncoderModule;
    const enc = await (typeof mod === 'function' ? mod() : mod.default());
    return (base: Uint8Array, target: Uint8Array) => toStandardVcdiff(enc(base, target));
  })();
  return xdelta;
}

/** Our Fossil encoder (delta/fossil.ts: shorter deltas than `fossil-delta`'s createDelta, same format). */
const fossil: Encode = fossilDelta;

/** The encoders for `algos`, loaded once. */
export async function loadEncoders(algos: readonly Algo[]): Promise<Record<Algo, Encode | null>> {
  return {
    fossil: algos.includes('fossil') ? fossil : null,
    xdelta3: algos.includes('xdelta3') ? await loadXdelta() : null,
  };
}
