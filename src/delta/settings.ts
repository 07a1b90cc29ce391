// Which delta setting applies, decided from configuration and the client's requests.
// Pure: the shards (at subscribe) and the sequencer (per message) both ask it.
//
//   channel settings   app `channel_delta_compression`: exact name, then the first matching
//                      wildcard in declaration order (`prefix*`, `*suffix`), then `*`
//   a subscription     spec resolution order, highest first:
//                      1 private-encrypted- → off
//                      2 per-subscription `delta` (subscribe data)
//                      3 per-channel server configuration
//                      4 the socket's pusher:enable_delta_compression
//                      5 server default (delta_compression.algorithm)
//
// A socket that asked for nothing (neither 2 nor 4) never gets deltas, whatever the
// channel configuration says: a standard pusher-js client cannot decode them, and the
// extensions are opt-in (spec, "standard clients are unaffected"). `delta_compression.
// enabled: false` is the global switch: no deltas at all (the sequencer is not started).

import type { AppConfig, ChannelDeltaSetting, Config, DeltaAlgorithm } from '../config/types';
import { isEncrypted } from '../protocol/channels';

/** Algorithm names on the wire (pusher:delta `algorithm`, subscribe data). */
export type Algo = 'fossil' | 'xdelta3';
export const ALGOS: readonly Algo[] = ['fossil', 'xdelta3'];

export function wireAlgo(a: DeltaAlgorithm): Algo {
  return a === 'Xdelta3' ? 'xdelta3' : 'fossil';
}

/** Defaults for the object form's bounds when it leaves them out (documented in README). */
export const DEFAULT_MAX_MESSAGES_PER_KEY = 10;
export const DEFAULT_MAX_CONFLATION_KEYS = 100;

/** A channel's settings, normalised. enabled null: `inherit` (or no entry). */
export interface ChannelDelta {
  enabled: boolean | null;
  algorithm: Algo | null;
  conflationKey: string | null;
  maxMessagesPerKey: number;
  maxConflationKeys: number;
}

const INHERIT: ChannelDelta = Object.freeze({
  enabled: null, algorithm: null, conflationKey: null,
  maxMessagesPerKey: DEFAULT_MAX_MESSAGES_PER_KEY, maxConflationKeys: DEFAULT_MAX_CONFLATION_KEYS,
});

function normalise(s: ChannelDeltaSetting): ChannelDelta {
  if (s === 'inherit') return INHERIT;
  if (s === 'disabled') return { ...INHERIT, enabled: false };
  if (s === 'Fossil' || s === 'Xdelta3') return { ...INHERIT, enabled: true, algorithm: wireAlgo(s) };
  return {
    enabled: s.enabled,
    algorithm: s.algorithm === null ? null : wireAlgo(s.algorithm),
    conflationKey: s.conflation_key,
    maxMessagesPerKey: s.max_messages_per_key ?? DEFAULT_MAX_MESSAGES_PER_KEY,
    maxConflationKeys: s.max_conflation_keys ?? DEFAULT_MAX_CONFLATION_KEYS,
  };
}

interface Compiled {
  exact: Map<string, ChannelDelta>;
  wild: { prefix: string | null; suffix: string | null; s: ChannelDelta }[];
  all: ChannelDelta | null;
}

/** An app's patterns compiled once (config time), with a bounded memo per channel name. */
export class ChannelSettings {
  private readonly byApp = new Map<string, Compiled>();
  private readonly memo = new Map<string, ChannelDelta>();

  constructor(apps: readonly AppConfig[]) {
    for (const app of apps) {
      const c: Compiled = { exact: new Map(), wild: [], all: null };
      for (const [pattern, setting] of Object.entries(app.channel_delta_compression)) {
        const s = normalise(setting);
        if (pattern === '*') c.all = s;
        else if (pattern.endsWith('*')) c.wild.push({ prefix: pattern.slice(0, -1), suffix: null, s });
        else if (pattern.startsWith('*')) c.wild.push({ prefix: null, suffix: pattern.slice(1), s });
        else c.exact.set(pattern, s);
      }
      this.byApp.set(app.id, c);
    }
  }

  of(app: string, channel: string): ChannelDelta {
    const key = app + ' ' + channel;
    let s = this.memo.get(key);
    if (s !== undefined) return s;
    s = this.resolve(app, channel);
    if (this.memo.size >= 10_000) this.memo.clear(); // bounded: many distinct channels
    this.memo.set(key, s);
    return s;
  }

  private resolve(app: string, channel: string): ChannelDelta {
    const c = this.byApp.get(app);
    if (c === undefined) return INHERIT;
    const exact = c.exact.get(channel);
    if (exact !== undefined) return exact;
    for (const w of c.wild) {
      if (w.prefix !== null ? channel.startsWith(w.prefix) : channel.endsWith(w.suffix!)) return w.s;
    }
    return c.all ?? INHERIT;
  }
}

/** `delta` of a subscribe frame, parsed: unset, off, or on (with an algorithm or not). */
export type SubscriptionDelta = { kind: 'unset' } | { kind: 'off' } | { kind: 'on'; algorithm: Algo | null };

const UNSET: SubscriptionDelta = { kind: 'unset' };
const OFF: SubscriptionDelta = { kind: 'off' };

function algoName(v: string): Algo | 'disabled' | null {
  const n = v.toLowerCase();
  return n === 'fossil' || n === 'xdelta3' || n === 'disabled' ? n : null;
}

/** Parses the subscribe data's `delta`; a string error names what is wrong. */
export function parseSubscriptionDelta(v: unknown): SubscriptionDelta | string {
  if (v === undefined || v === null) return UNSET;
  if (v === true) return { kind: 'on', algorithm: null };
  if (v === false) return OFF;
  if (typeof v === 'string') {
    const a = algoName(v);
    if (a === null) return `delta must be "fossil", "xdelta3", "disabled", a boolean or {enabled, algorithm}; got ${JSON.stringify(v).slice(0, 40)}`;
    return a === 'disabled' ? OFF : { kind: 'on', algorithm: a };
  }
  if (typeof v === 'object' && !Array.isArray(v)) {
    const o = v as { enabled?: unknown; algorithm?: unknown };
    if (o.enabled !== undefined && typeof o.enabled !== 'boolean') return 'delta.enabled must be a boolean';
    let algorithm: Algo | null = null;
    if (o.algorithm !== undefined && o.algorithm !== null) {
      const a = typeof o.algorithm === 'string' ? algoName(o.algorithm) : null;
      if (a === null || a === 'disabled') return 'delta.algorithm must be "fossil" or "xdelta3"';
      algorithm = a;
    }
    return o.enabled === false ? OFF : { kind: 'on', algorithm };
  }
  return 'delta must be "fossil", "xdelta3", "disabled", a boolean or {enabled, algorithm}';
}

/**
 * The algorithm a subscription gets, or null for plain messages (the order at the top).
 * `socket`: the algorithm the socket opted into with pusher:enable_delta_compression, or null.
 */
export function resolveSubscription(config: Config, ch: ChannelDelta, channel: string, sub: SubscriptionDelta, socket: Algo | null): Algo | null {
  if (!config.delta_compression.enabled) return null;
  if (isEncrypted(channel)) return null;
  const fallback = wireAlgo(config.delta_compression.algorithm);
  if (sub.kind === 'off') return null;
  if (sub.kind === 'on') return sub.algorithm ?? ch.algorithm ?? socket ?? fallback;
  if (ch.enabled === false) return null;
  if (socket === null) return null;
  return ch.algorithm ?? socket;
}
