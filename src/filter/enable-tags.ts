// `enable_tags` (the spec's per-channel setting, in the object form of an app's
// channel_delta_compression): whether a delivered message carries its tags as "tags".
// The entry of a channel is found as the spec orders it: the exact name, then the first
// matching wildcard (`prefix*`, `*suffix`) in the order written, then `*`. String forms
// (Fossil, Xdelta3, disabled, inherit) and no entry at all mean no tags.

import type { AppConfig, ChannelDeltaSetting } from '../config/types';

function entryFor(settings: Readonly<Record<string, ChannelDeltaSetting>>, channel: string): ChannelDeltaSetting | undefined {
  if (Object.hasOwn(settings, channel)) return settings[channel];
  for (const pattern of Object.keys(settings)) {
    if (pattern === '*' || pattern.length < 2) continue;
    if (pattern.endsWith('*') && channel.startsWith(pattern.slice(0, -1))) return settings[pattern];
    if (pattern.startsWith('*') && channel.endsWith(pattern.slice(1))) return settings[pattern];
  }
  return Object.hasOwn(settings, '*') ? settings['*'] : undefined;
}

export function tagsEnabled(app: Pick<AppConfig, 'channel_delta_compression'>, channel: string): boolean {
  const s = entryFor(app.channel_delta_compression, channel);
  return typeof s === 'object' && s !== null && s.enable_tags;
}
