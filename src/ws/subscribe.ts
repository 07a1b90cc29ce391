// pusher:subscribe / pusher:unsubscribe and the cleanup of a closing socket.
//
// Public and private channels subscribe locally and answer at once, then tell the owner
// shard (async). Presence asks the owner first (join → member snapshot) and subscribes
// the socket to the uWS topic only when the answer arrives, so the snapshot and every
// later member event reach the client in one order (per-pair FIFO owner → this shard).

import type { AppConfig } from '../config/types';
import { BusFullError, BusPeerRestartedError } from '../bus/errors';
import { userKey } from '../channels/owner';
import { topicOf } from '../channels/topic';
import { metersFor } from '../metrics/meters';
import { channelType, type ChannelType, isServerToUser, SERVER_TO_USER_PREFIX, serverToUserId, validateChannelName } from '../protocol/channels';
import { Ev } from '../protocol/events';
import { frame } from '../protocol/frames';
import { verifyChannelAuth } from '../protocol/hmac';
import { ErrorCode, SubscriptionStatus, type SubscriptionErrorType } from '../protocol/codes';
import { compileFilter, type CompiledFilter } from '../filter/compile';
import { parseFilter } from '../filter/parse';
import { parseTags } from '../filter/tags';
import type { WsDeps } from './deps';
import type { Socket, SocketData, Subscription } from './types';
import type { Algo } from '../delta/settings';
import { serialTopicOf, type AttachHow, type Plan } from '../history/shard';
import { sendFrame } from './send';
import { cancelWaiting, waitForBackend, waitingOf } from './subscribe-wait';

interface SubscribeData {
  channel?: unknown;
  auth?: unknown;
  channel_data?: unknown;
  /** Tag filtering (filter/parse.ts). */
  filter?: unknown;
  /** Per-subscription delta compression (delta/settings.ts). */
  delta?: unknown;
  /** History: positions and a resume point (history/shard.ts). */
  recover?: unknown;
}

export interface Subscriptions {
  subscribe(ws: Socket, d: SocketData, data: SubscribeData): void;
  unsubscribe(ws: Socket, d: SocketData, channel: unknown): void;
  /** The socket closed: give every subscription back to its owner. */
  dropAll(ws: Socket, d: SocketData): void;
}

/** The subscription record of every public or private (non-cache) channel subscription. */
const PLAIN: Readonly<Record<Exclude<ChannelType, 'presence'>, Subscription>> = {
  public: Object.freeze({ type: 'public', userKey: null, userId: null, joined: true }),
  private: Object.freeze({ type: 'private', userKey: null, userId: null, joined: true }),
  'private-encrypted': Object.freeze({ type: 'private-encrypted', userKey: null, userId: null, joined: true }),
};

/** The filter stage's key of a filtered subscription: the channel's topic, or with positions its serial topic (history/shard.ts). */
export function filterTopicOf(app: string, channel: string, sub: Subscription): string {
  return sub.history?.serial ? serialTopicOf(app, channel) : topicOf(app, channel);
}

export function createSubscriptions(deps: WsDeps): Subscriptions {
  const { directory, interest } = deps;
  const numbered = deps.numbered ?? null;
  const meters = metersFor(deps.metrics);
  const { limits } = deps.config;

  /**
   * The socket's subscription record of a channel, and this shard's interest in the
   * channel with it: set before anything about the subscription shows outside this shard
   * (channels/interest.ts, invariant 3).
   */
  function track(d: SocketData, app: AppConfig, channel: string, sub: Subscription) {
    d.channels.set(channel, sub);
    interest.add(app.id, channel);
    if (numbered) {
      const k = numbered.hold(app.id, channel);
      if (k >= 0) sub.subject = k;
    }
  }

  /** What track() held, let go. */
  function unhold(app: AppConfig, channel: string, sub: Subscription) {
    interest.remove(app.id, channel);
    if (sub.subject !== undefined) numbered!.release(sub.subject);
  }

  function untrack(ws: Socket, d: SocketData, app: AppConfig, channel: string) {
    const sub = d.channels.get(channel);
    if (sub && d.channels.delete(channel)) {
      unhold(app, channel, sub);
      unfilter(ws, app, channel, sub);
    }
  }

  /**
   * Where a subscription receives the channel's messages: the native topic, or, with a tag
   * filter, the shard's filter stage (channels/filtered.ts), never both.
   */
  function receive(ws: Socket, app: AppConfig, channel: string, sub: Subscription, filter: CompiledFilter | null) {
    if (filter === null || !deps.filters) {
      ws.subscribe(topicOf(app.id, channel));
    } else {
      sub.filter = deps.filters.add(topicOf(app.id, channel), ws, filter);
      sub.tagFilter = filter;
    }
  }

  function unfilter(ws: Socket, app: AppConfig, channel: string, sub: Subscription) {
    if (sub.filter && deps.filters) deps.filters.remove(filterTopicOf(app.id, channel, sub), ws, sub.filter);
  }

  /**
   * The subscribe's `filter`, validated once: null without one, undefined when it was
   * refused (the subscription_error is sent).
   */
  function filterOf(ws: Socket, d: SocketData, channel: string, raw: unknown): CompiledFilter | null | undefined {
    if (raw === undefined || raw === null) return null;
    const tf = deps.config.tag_filtering;
    if (!tf.enabled || !deps.filters) {
      subscriptionError(ws, channel, 'InvalidFilter', 'tag filtering is not enabled on this server (tag_filtering.enabled)', SubscriptionStatus.InvalidFilter);
      return undefined;
    }
    const parsed = parseFilter(raw, tf.max_nodes, limits.max_filter_values);
    if (!parsed.ok) {
      subscriptionError(ws, channel, 'InvalidFilter', parsed.error, SubscriptionStatus.InvalidFilter);
      return undefined;
    }
    const refused = overFilterValues(d, parsed.values);
    if (refused !== null) {
      subscriptionError(ws, channel, 'LimitReached', refused, SubscriptionStatus.ConnectionLimit);
      return undefined;
    }
    return compileFilter(parsed.filter);
  }

  /** limits.max_filter_values_per_connection: the refusal when `values` more would pass it, else null. */
  function overFilterValues(d: SocketData, values: number): string | null {
    if (values === 0) return null;
    let held = 0;
    for (const sub of d.channels.values()) held += sub.tagFilter?.values ?? 0;
    if (held + values <= limits.max_filter_values_per_connection) return null;
    return `this connection's tag filters hold ${held} "in" / "nin" values; ${values} more would pass the ${limits.max_filter_values_per_connection} allowed (limits.max_filter_values_per_connection)`;
  }

  function subscriptionError(ws: Socket, channel: string, type: SubscriptionErrorType, error: string, status: number) {
    const appId = ws.getUserData().app!.id;
    meters.app(appId).subscriptionError(type).inc();
    sendFrame(meters, ws, appId, Ev.SubscriptionError, frame(deps.out(Ev.SubscriptionError), { type, error, status }, channel));
  }

  function succeeded(ws: Socket, channel: string, data: string) {
    sendFrame(meters, ws, ws.getUserData().app!.id, Ev.SubscriptionSucceeded, frame(deps.out(Ev.SubscriptionSucceeded), data, channel));
  }

  /**
   * Cache channels: after subscription_succeeded, the owner's cached event exactly as it
   * was published, or pusher:cache_miss. Nothing when a live API publish on the channel
   * reached this shard meanwhile (the socket got it) or the subscription ended. Nothing
   * either for a subscription that resumes from a position on a history channel: the
   * cached event is the channel's last message, which that subscription had before it was
   * cut or gets in its replay (numbered), so a replay of it would be a copy.
   */
  function replayCache(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription, plan: Plan) {
    const cache = deps.cache;
    if (!cache || cache.ttl(channel) === null) return;
    if (plan?.kind === 'attach' && plan.recover.kind === 'resume') return;
    cache.forReplay(app.id, channel).then((r) => {
      if (d.closed || d.channels.get(channel) !== sub || r.kind === 'live') return;
      // A filtered subscription: the cached event counts only when its tags match.
      const hit = r.kind === 'hit' && (!sub.tagFilter || (r.tags !== null && sub.tagFilter.test(parseTags(r.tags).tags)));
      ws.cork(() => {
        if (hit && r.kind === 'hit') sendFrame(meters, ws, app.id, 'api-event', r.message);
        else sendFrame(meters, ws, app.id, Ev.CacheMiss, frame(deps.out(Ev.CacheMiss), undefined, channel));
      });
      if (r.kind === 'miss') deps.webhooks?.cacheMiss(app.id, channel);
    }, (err: Error) => deps.log.warn({ err, channel }, 'cache channel: no answer from the owner, nothing replayed'));
  }

  /** Tells the owner a subscription went away (best effort: a full queue is logged). */
  function release(app: AppConfig, channel: string, socketId: string, sub: Subscription) {
    if (sub.type === 'presence') {
      meters.presenceLeaves.inc();
      deps.shadows?.left(app.id, channel);
      directory.leave(app.id, channel, socketId, sub.userKey!);
    } else {
      directory.unsubscribe(app.id, channel);
    }
  }

  function presenceData(members: [unknown, unknown][]): string {
    const ids: unknown[] = [];
    const hash: Record<string, unknown> = {};
    for (const [id, info] of members) {
      ids.push(id);
      hash[userKey(id)] = info === undefined ? null : info;
    }
    return JSON.stringify({ presence: { ids, hash, count: ids.length } });
  }

  /**
   * The socket on the channel's uWS topic: the plain one, its delta topic (delta/shard.ts),
   * or, with a tag filter, the filtered subscriptions (channels/filtered.ts); filtered with
   * deltas, its filter's delta streams (delta/shard.ts rule 8: filter, then delta).
   */
  function subscribeTopic(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription, filter: CompiledFilter | null, algo: Algo | null) {
    if (sub.history) {
      // joins its topic after the owner's answer (history/shard.ts); a delta subscription
      // waits held in its delta set until then (delta/shard.ts rule 9), a filtered one
      // joins the filter stage then (its filter is known at once: a cache replay tests it)
      if (algo !== null) deps.delta!.subscribe(ws, d, app, channel, algo, null, { serial: sub.history.serial, held: true });
      else if (filter !== null) sub.tagFilter = filter;
      return;
    }
    if (algo !== null) {
      if (filter !== null) sub.tagFilter = filter;
      deps.delta!.subscribe(ws, d, app, channel, algo, filter);
    } else if (filter !== null && deps.filters) {
      receive(ws, app, channel, sub, filter);
    } else {
      ws.subscribe(topicOf(app.id, channel));
    }
  }

  /** The delta algorithm of this subscription (null: plain), or false once a bad `delta` was answered. */
  function deltaOf(ws: Socket, d: SocketData, app: AppConfig, channel: string, delta: unknown): Algo | null | false {
    if (!deps.delta) return null;
    const r = deps.delta.resolve(d, app, channel, delta);
    if (r === null || typeof r === 'string') return r;
    subscriptionError(ws, channel, 'InvalidDelta', r.error, SubscriptionStatus.InvalidDelta);
    return false;
  }

  function joinPresence(ws: Socket, d: SocketData, app: AppConfig, channel: string, channelData: string, filter: CompiledFilter | null, algo: Algo | null, plan: Plan) {
    let parsed: { user_id?: unknown; user_info?: unknown };
    try {
      parsed = JSON.parse(channelData) as { user_id?: unknown; user_info?: unknown };
    } catch {
      return subscriptionError(ws, channel, 'AuthError', 'channel_data is not valid JSON', SubscriptionStatus.AuthFailed);
    }
    const uid = parsed?.user_id;
    if (!(typeof uid === 'string' && uid.length > 0) && !(typeof uid === 'number' && Number.isFinite(uid))) {
      return subscriptionError(ws, channel, 'AuthError', 'channel_data must contain a user_id (string or number)', SubscriptionStatus.AuthFailed);
    }
    let infoBytes: number;
    try {
      infoBytes = Buffer.byteLength(JSON.stringify(parsed.user_info ?? null));
    } catch {
      // Nested too deeply to serialise (stack overflow): would kill the shard (test/fuzz/ws.fuzz.test.ts).
      return subscriptionError(ws, channel, 'LimitReached', 'user_info is nested too deeply', SubscriptionStatus.MemberSize);
    }
    if (infoBytes > app.max_presence_member_size_in_kb * 1024) {
      return subscriptionError(ws, channel, 'LimitReached',
        `user_info is ${infoBytes} bytes, more than the ${app.max_presence_member_size_in_kb} KB allowed`, SubscriptionStatus.MemberSize);
    }
    const sub: Subscription = { type: 'presence', userKey: userKey(uid), userId: uid, userInfo: parsed.user_info, joined: false };
    if (plan?.kind === 'attach') sub.history = { serial: plan.recover.kind !== 'none' };
    track(d, app, channel, sub);
    // retry: the owner shard crashed before answering; ask its replacement once (the
    // request then waits behind the rebuild there, see channels/rebuild.ts).
    const ask = (retry: boolean): void => void directory.join(app.id, channel, d.id, uid, parsed.user_info).then((reply) => {
      const current = !d.closed && d.channels.get(channel) === sub;
      if (!current) {
        // Closed or unsubscribed while the owner answered: undo the join.
        if (reply.ok) directory.leave(app.id, channel, d.id, sub.userKey!);
        return;
      }
      if (!reply.ok) {
        untrack(ws, d, app, channel);
        return subscriptionError(ws, channel, reply.type, reply.error, reply.status);
      }
      sub.joined = true;
      d.authBy = 0; // user_authentication_timeout met
      deps.shadows?.joined(app.id, channel, reply.members);
      meters.app(app.id).subscription('presence').inc();
      meters.presenceJoins.inc();
      ws.cork(() => {
        subscribeTopic(ws, d, app, channel, sub, filter, algo);
        succeeded(ws, channel, presenceData(reply.members));
        afterSucceeded(ws, d, app, channel, sub, plan, filter, algo);
      });
      replayCache(ws, d, app, channel, sub, plan);
    }, (err: Error) => {
      if (retry && err instanceof BusPeerRestartedError && !d.closed && d.channels.get(channel) === sub) return ask(false);
      deps.log.error({ err, channel }, 'presence join failed');
      // Given up without an answer: the owner may still apply the join (it was only slow).
      // The leave follows the join on the same FIFO ring; the owner ignores it for a socket
      // it never joined (refused, never arrived), so another tab of the user keeps its count.
      if (!(err instanceof BusFullError) && !deps.stopping()) directory.leave(app.id, channel, d.id, sub.userKey!);
      if (!d.closed && d.channels.get(channel) === sub) {
        untrack(ws, d, app, channel);
        ws.cork(() => subscriptionError(ws, channel, 'LimitReached', 'server busy, try again', ErrorCode.OverCapacity));
      }
    });
    ask(true);
  }

  /** History: a `recover` on a channel without history is answered; a rewind or recovery asks the owner. */
  function afterSucceeded(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription, plan: Plan, filter: CompiledFilter | null, algo: Algo | null) {
    if (plan === null || !deps.history) return;
    if (plan.kind === 'no_history') return deps.history.noHistory(ws, app, channel);
    let how: AttachHow | undefined;
    if (algo !== null) how = { join: () => deps.delta!.release(ws, d, channel), relay: true };
    else if (filter !== null && deps.filters) {
      const filters = deps.filters;
      how = { join: () => void (sub.filter = filters.add(filterTopicOf(app.id, channel, sub), ws, filter)), filter };
    }
    deps.history.attach(ws, d, app, channel, sub, plan, how);
  }

  function admitPlain(ws: Socket, d: SocketData, app: AppConfig, channel: string, type: Exclude<ChannelType, 'presence'>,
    filter: CompiledFilter | null, algo: Algo | null, plan: Plan) {
    // One shared record per type (read-only: only presence records change) unless the
    // channel replays a cache, which tells its subscriptions apart by identity.
    // A filtered one has its own record too: it holds its entry in the filter index; and so
    // does one of a history channel with history.driver redis: it holds a numbered subject.
    const sub: Subscription = filter !== null || plan?.kind === 'attach' || (deps.cache && deps.cache.ttl(channel) !== null) ||
      (numbered !== null && deps.history?.settings.of(app.id, channel))
      ? { type, userKey: null, userId: null, joined: true } : PLAIN[type];
    if (plan?.kind === 'attach') sub.history = { serial: plan.recover.kind !== 'none' };
    track(d, app, channel, sub);
    subscribeTopic(ws, d, app, channel, sub, filter, algo);
    meters.app(app.id).subscription(type).inc();
    if (plan?.kind !== 'attach') {
      succeeded(ws, channel, '{}');
      afterSucceeded(ws, d, app, channel, sub, plan, filter, algo);
    } else {
      // corked: the rewind or recovery question leaves before the client can see
      // subscription_succeeded, so what it publishes on seeing it is numbered after the
      // answer (a thread preempted between the two writes let it overtake the question)
      ws.cork(() => {
        succeeded(ws, channel, '{}');
        afterSucceeded(ws, d, app, channel, sub, plan, filter, algo);
      });
    }
    directory.subscribe(app.id, channel);
    replayCache(ws, d, app, channel, sub, plan);
  }

  function resendSucceeded(ws: Socket, d: SocketData, app: AppConfig, channel: string, sub: Subscription) {
    if (sub.type !== 'presence') return succeeded(ws, channel, '{}');
    if (!sub.joined) return; // the answer to the first subscribe is on its way
    directory.members(app.id, channel)
      .then((members) => {
        if (!d.closed && d.channels.get(channel) === sub) ws.cork(() => succeeded(ws, channel, presenceData(members)));
      }, (err: Error) => deps.log.warn({ err, channel }, 'member snapshot for a repeated subscribe failed'));
  }

  return {
    subscribe(ws, d, data) {
      const app = d.app!;
      const channel = data?.channel;
      const invalid = validateChannelName(channel, app.max_channel_name_length);
      if (invalid !== null || typeof channel !== 'string') {
        const tooLong = typeof channel === 'string' && channel.length > app.max_channel_name_length;
        return subscriptionError(ws, typeof channel === 'string' ? channel : '',
          tooLong ? 'LimitReached' : 'InvalidChannel', invalid ?? 'channel must be a string', tooLong ? SubscriptionStatus.NameLength : SubscriptionStatus.InvalidChannel);
      }
      // '#server-to-user-<id>' carries events for the sockets signed in as that user: a
      // plain subscribe must not open it to anyone (no socket is signed in here yet; the
      // pusher:signin handling must let a socket signed in as <id> through).
      if (isServerToUser(channel)) {
        // The socket is on that topic since its signin; pusher-js still subscribes.
        if (d.userId !== null && serverToUserId(channel) === d.userId) return succeeded(ws, channel, '{}');
        return subscriptionError(ws, channel, 'AuthError', `${channel} is only for sockets signed in as that user`, SubscriptionStatus.AuthFailed);
      }
      const existing = d.channels.get(channel);
      if (existing) return resendSucceeded(ws, d, app, channel, existing);
      const waits = waitingOf(d);
      if (waits?.has(channel)) return; // the answer to the first subscribe is on its way
      const held = d.channels.size + (waits?.size ?? 0);
      if (held >= limits.max_subscriptions_per_connection) {
        return subscriptionError(ws, channel, 'LimitReached', `this connection is subscribed to ${held} channels, the most allowed (limits.max_subscriptions_per_connection); unsubscribe from one first`, SubscriptionStatus.ConnectionLimit);
      }

      const filter = filterOf(ws, d, channel, data.filter);
      if (filter === undefined) return;
      const type = channelType(channel);
      if (type !== 'public') {
        const channelData = type === 'presence' ? data.channel_data : undefined;
        if (type === 'presence' && typeof channelData !== 'string') {
          return subscriptionError(ws, channel, 'AuthError', 'presence channels need channel_data (a JSON string)', SubscriptionStatus.AuthFailed);
        }
        if (!verifyChannelAuth(data.auth, app.key, app.secret, d.id, channel, channelData as string | undefined)) {
          return subscriptionError(ws, channel, 'AuthError',
            data.auth === undefined ? `auth is required to subscribe to ${channel}` : `invalid signature for ${channel}`, SubscriptionStatus.AuthFailed);
        }
        if (type !== 'presence') d.authBy = 0; // user_authentication_timeout met (private channels succeed right below)
      }
      // (a tag-filtered subscription takes a rewind and positions: the stores keep the tags)
      const plan: Plan = deps.history && (filter === null || deps.history.filtered) ? deps.history.plan(app, channel, data.recover) : null;
      /** The history bounds (one question per channel, a few per connection, the replay budget): false when refused. */
      const questionAllowed = (): boolean => {
        const busy = plan?.kind === 'attach' ? deps.history!.admit(d, channel) : null;
        if (busy === null) return true;
        meters.app(app.id).rateLimited('history_questions').inc();
        subscriptionError(ws, channel, 'LimitReached', busy, SubscriptionStatus.ConnectionLimit);
        return false;
      };
      if (!questionAllowed()) return;
      // History channels take deltas when numbered by their owner shard, unfiltered (docs/history.md, "With delta compression")
      const noDelta = deps.history?.settings.of(app.id, channel) && (!deps.history.deltas || filter !== null);
      const algo = noDelta ? null : deltaOf(ws, d, app, channel, data.delta);
      if (algo === false) return;
      const join = type === 'presence'
        ? () => joinPresence(ws, d, app, channel, data.channel_data as string, filter, algo, plan)
        : () => admitPlain(ws, d, app, channel, type, filter, algo, plan);
      // in a cluster, and for history channels with history.driver redis: after the backend's
      // subscription (ws/subscribe-wait.ts)
      const admit = waitForBackend(deps, d, app.id, channel, questionAllowed, join) ?? join;
      // subscribe hook (hooks/connection.ts): after the auth check, before anything is joined or answered
      if (deps.hooks?.subscribe(ws, d, channel, type === 'presence' ? data.channel_data as string : undefined, admit)) return;
      admit();
    },

    unsubscribe(ws, d, channel) {
      if (typeof channel !== 'string') return;
      const sub = d.channels.get(channel);
      if (!sub) return cancelWaiting(d, channel);
      untrack(ws, d, d.app!, channel);
      deps.history?.unsubscribe(ws, d.app!.id, channel, sub);
      if (!sub.filter && !deps.delta?.unsubscribe(ws, d, d.app!.id, channel)) ws.unsubscribe(topicOf(d.app!.id, channel));
      if (sub.joined) release(d.app!, channel, d.id, sub);
    },

    dropAll(ws, d) {
      const app = d.app;
      if (!app) return;
      // Interest always goes with the records; the owners are not told when the shard stops.
      const tell = !deps.stopping();
      for (const [channel, sub] of d.channels) {
        unhold(app, channel, sub);
        unfilter(ws, app, channel, sub);
        if (tell && sub.joined) release(app, channel, d.id, sub);
      }
      d.channels.clear();
      if (d.userId !== null) interest.remove(app.id, SERVER_TO_USER_PREFIX + d.userId);
    },
  };
}
