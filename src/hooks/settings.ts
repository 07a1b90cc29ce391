// An app's hooks, compiled once per AppConfig object (a config reload hands the shards new
// objects: reload/shard.ts, so the next call after a SIGHUP uses the new settings).

import type { AppConfig, HookKind, HookSettings } from '../config/types';
import { compilePatterns, type Matcher } from './patterns';

export interface CompiledHook extends HookSettings {
  kind: HookKind;
  channel: Matcher;
  event: Matcher;
}

export type CompiledHooks = Readonly<Record<HookKind, CompiledHook | null>>;

const compiled = new WeakMap<AppConfig, CompiledHooks | null>();

function compile(kind: HookKind, s: HookSettings): CompiledHook | null {
  if (!s.enabled) return null;
  return { ...s, kind, channel: compilePatterns(s.channels), event: compilePatterns(s.events) };
}

/** The app's enabled hooks; null when it has none enabled (the common case: one WeakMap lookup). */
export function hooksOf(app: AppConfig): CompiledHooks | null {
  let c = compiled.get(app);
  if (c === undefined) {
    const h = app.hooks;
    c = null;
    if (h !== null) {
      const all = {
        connect: compile('connect', h.connect),
        subscribe: compile('subscribe', h.subscribe),
        client_event: compile('client_event', h.client_event),
        publish: compile('publish', h.publish),
      };
      if (all.connect || all.subscribe || all.client_event || all.publish) c = all;
    }
    compiled.set(app, c);
  }
  return c;
}

/** The hook of `kind` that applies to this channel (and event), or null. */
export function hookFor(app: AppConfig, kind: HookKind, channel?: string, event?: string): CompiledHook | null {
  if (app.hooks === null) return null;
  const h = hooksOf(app)?.[kind] ?? null;
  if (h === null) return null;
  if (channel !== undefined && !h.channel(channel)) return null;
  if (event !== undefined && !h.event(event)) return null;
  return h;
}
