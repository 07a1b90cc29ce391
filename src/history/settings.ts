// Which channels have history: an app's `channel_history` patterns, matched as
// channel_delta_compression's (docs/protocol.md: exact name first, then the first matching
// wildcard in the order written, then `*`). Compiled once per app object (an apps reload
// gives new objects), answers memoised per channel name with a bound.

import type { AppConfig, ChannelHistorySetting } from '../config/types';

interface Compiled {
  exact: Map<string, ChannelHistorySetting>;
  wild: { prefix: string | null; suffix: string | null; s: ChannelHistorySetting }[];
  all: ChannelHistorySetting | null;
  /** No pattern: every channel of the app answers null without a memo lookup. */
  empty: boolean;
}

const MEMO_MAX = 10_000;

export class HistorySettings {
  private readonly compiled = new WeakMap<AppConfig, Compiled>();
  private readonly memo = new Map<string, { app: AppConfig; s: ChannelHistorySetting | null }>();

  constructor(private readonly apps: { byId(id: string): AppConfig | undefined }) {}

  /** The channel's history setting, or null when it has none. */
  of(appId: string, channel: string): ChannelHistorySetting | null {
    const app = this.apps.byId(appId);
    if (app === undefined) return null;
    const c = this.compile(app);
    if (c.empty) return null;
    const key = appId + ' ' + channel;
    const hit = this.memo.get(key);
    if (hit !== undefined && hit.app === app) return hit.s;
    const s = resolve(c, channel);
    if (this.memo.size >= MEMO_MAX) this.memo.clear();
    this.memo.set(key, { app, s });
    return s;
  }

  private compile(app: AppConfig): Compiled {
    let c = this.compiled.get(app);
    if (c !== undefined) return c;
    c = { exact: new Map(), wild: [], all: null, empty: Object.keys(app.channel_history).length === 0 };
    for (const [pattern, s] of Object.entries(app.channel_history)) {
      if (pattern === '*') c.all = s;
      else if (pattern.endsWith('*')) c.wild.push({ prefix: pattern.slice(0, -1), suffix: null, s });
      else if (pattern.startsWith('*')) c.wild.push({ prefix: null, suffix: pattern.slice(1), s });
      else c.exact.set(pattern, s);
    }
    this.compiled.set(app, c);
    return c;
  }
}

function resolve(c: Compiled, channel: string): ChannelHistorySetting | null {
  const exact = c.exact.get(channel);
  if (exact !== undefined) return exact;
  for (const w of c.wild) {
    if (w.prefix !== null ? channel.startsWith(w.prefix) : channel.endsWith(w.suffix!)) return w.s;
  }
  return c.all;
}
