// GET /apps/{id}/channels, /channels/{name}, /channels/{name}/users: answered by the
// owner shards (the list is a scatter-gather over all of them).

import type { AppConfig } from '../config/types';
import { isCacheChannel, isPresence, validateChannelName } from '../protocol/channels';
import type { ApiDeps } from './deps';
import { getHistory } from '../history/rest';
import { jsonError, type ApiResponse } from './request';

/** Parses `info=a,b`; returns the set or an error naming the attribute that is not allowed. */
function parseInfo(raw: string | undefined, allowed: readonly string[]): Set<string> | ApiResponse {
  const out = new Set<string>();
  if (!raw) return out;
  for (const part of raw.split(',')) {
    const attr = part.trim();
    if (attr === '') continue;
    if (!allowed.includes(attr)) {
      return jsonError(400, `info attribute ${JSON.stringify(attr)} is not allowed here (allowed: ${allowed.join(', ')})`);
    }
    out.add(attr);
  }
  return out;
}

function decodeChannel(app: AppConfig, raw: string): string | ApiResponse {
  let channel: string;
  try {
    channel = decodeURIComponent(raw);
  } catch {
    return jsonError(400, 'channel name in the path is not valid percent-encoding');
  }
  const bad = validateChannelName(channel, app.max_channel_name_length);
  return bad === null ? channel : jsonError(400, `invalid channel ${JSON.stringify(channel)}: ${bad}`);
}

export async function getChannels(deps: ApiDeps, app: AppConfig, params: ReadonlyMap<string, string>): Promise<ApiResponse> {
  const info = parseInfo(params.get('info'), ['user_count']);
  if (!(info instanceof Set)) return info;
  const prefix = params.get('filter_by_prefix') ?? '';
  // Pusher's HTTP API reference: user_count only with filter_by_prefix=presence- (or a
  // longer presence- prefix), whatever is occupied now: the same request must not be
  // accepted or refused depending on which channels happen to exist.
  if (info.has('user_count') && !isPresence(prefix)) {
    return jsonError(400, `info=user_count exists only for presence channels: it needs filter_by_prefix=presence- (got ${prefix === '' ? 'no filter_by_prefix' : `filter_by_prefix=${JSON.stringify(prefix)}`})`);
  }
  const list = await deps.directory.list(app.id, prefix);
  const channels: Record<string, { user_count?: number }> = {};
  for (const [name, users] of list.sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    channels[name] = info.has('user_count') ? { user_count: users ?? 0 } : {};
  }
  return { status: 200, body: { channels } };
}

export async function getChannel(deps: ApiDeps, app: AppConfig, rawName: string, params: ReadonlyMap<string, string>): Promise<ApiResponse> {
  const channel = decodeChannel(app, rawName);
  if (typeof channel !== 'string') return channel;
  const info = parseInfo(params.get('info'), ['subscription_count', 'user_count', 'cache']);
  if (!(info instanceof Set)) return info;
  if (info.has('user_count') && !isPresence(channel)) {
    return jsonError(400, 'user_count can only be requested for presence channels');
  }
  if (info.has('cache') && !isCacheChannel(channel)) {
    return jsonError(400, "cache can only be requested for cache channels (names starting with cache-, private-cache-, presence-cache-, private-encrypted-cache- or ending in #cache-<seconds>)");
  }
  // Both questions go to the channel's owner; cache.driver `none`: never an entry.
  const [r, cached] = await Promise.all([
    deps.directory.info(app.id, channel),
    info.has('cache') && deps.cache ? deps.cache.lookup(app.id, channel) : null,
  ]);
  const body: Record<string, unknown> = { occupied: r.occupied };
  if (info.has('subscription_count')) body.subscription_count = r.subscription_count;
  if (info.has('user_count')) body.user_count = r.user_count ?? 0;
  if (cached) {
    // The message is the frame as published: {"event","channel","data":"<string>"}.
    const m = JSON.parse(cached.message) as { event: string; data: unknown };
    body.cache = { data: m.data, event: m.event, ttl: Math.ceil(cached.ttlMs / 1000) };
  }
  return { status: 200, body };
}

/** GET /apps/{id}/channels/{name}/history (history/rest.ts). */
export async function getChannelHistory(deps: ApiDeps, app: AppConfig, rawName: string, params: ReadonlyMap<string, string>): Promise<ApiResponse> {
  const channel = decodeChannel(app, rawName);
  if (typeof channel !== 'string') return channel;
  if (!deps.history) return jsonError(404, 'history is not served by this server');
  return getHistory(deps.history, app, channel, params);
}

export async function getUsers(deps: ApiDeps, app: AppConfig, rawName: string): Promise<ApiResponse> {
  const channel = decodeChannel(app, rawName);
  if (typeof channel !== 'string') return channel;
  if (!isPresence(channel)) return jsonError(400, 'users can only be listed for presence channels');
  const members = await deps.directory.members(app.id, channel);
  return { status: 200, body: { users: members.map(([id]) => ({ id })) } };
}
