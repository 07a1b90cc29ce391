// POST /apps/{id}/events and /apps/{id}/batch_events: validate everything first, then
// serialise each message once and hand them to the publish pipeline, all or nothing.

import type { Outgoing } from '../channels/publisher';
import type { AppConfig } from '../config/types';
import { BusFullError } from '../bus/bus';
import { isPresence, isServerToUser, validateChannelName, validateEventName } from '../protocol/channels';
import { metersFor } from '../metrics/meters';
import { isClientEvent } from '../protocol/events';
import { frame } from '../protocol/frames';
import { tagsEnabled } from '../filter/enable-tags';
import { serialiseTags } from '../filter/tags';
import { isValidSocketId } from '../protocol/socket-id';
import type { ApiDeps } from './deps';
import { invalidKey, type IdemReply, type IdemRoute } from '../history/idempotency';
import { isIdempotencyDown } from '../history/idempotency';
import { then, type MaybePromise } from './maybe';
import { limitBackendEvents } from './ratelimit';
import { jsonError, PUBLISHED, type ApiResponse } from './request';
import { Attr, SpanKind } from '../tracing/tracer';

export interface ParsedEvent {
  name: string;
  data: string;
  channels: string[];
  socketId: string;
  info: ReadonlySet<string>;
  /** The event's tags as sorted JSON (filter/tags.ts), or null: untagged. */
  tags: string | null;
  /** `"delta": true|false` (delta compression for this message); undefined when absent. */
  delta?: boolean;
  /** `idempotency_key` (history/idempotency.ts), or null. */
  key: string | null;
}

const EVENT_INFO = new Set(['subscription_count', 'user_count']);
/** `info` of an event that asks for none (shared). */
const NO_INFO: ReadonlySet<string> = new Set();

/** Returns the validated event or the error response (`where` prefixes messages in a batch). */
export function parseEvent(app: AppConfig, raw: unknown, where: string): ParsedEvent | ApiResponse {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return jsonError(400, `${where || 'the request body '}must be a JSON object`);
  const ev = raw as Record<string, unknown>;
  const badName = validateEventName(ev.name, app.max_event_name_length);
  if (badName !== null) return jsonError(400, `${where}${badName}`);
  const name = ev.name as string;
  if (isClientEvent(name)) return jsonError(400, `${where}event names starting with client- are reserved for client events`);
  if (ev.data === undefined) return jsonError(400, `${where}data is required`);
  let data: string;
  try {
    data = typeof ev.data === 'string' ? ev.data : JSON.stringify(ev.data);
  } catch {
    // Parsed JSON only fails to serialise when nested too deeply (RangeError: stack
    // overflow); a client mistake, not a 500 (test/fuzz/http.fuzz.test.ts).
    return jsonError(400, `${where}data is nested too deeply`);
  }
  const size = Buffer.byteLength(data);
  if (size > app.max_event_payload_in_kb * 1024) {
    return jsonError(413, `${where}data is ${size} bytes, more than the ${app.max_event_payload_in_kb} KB allowed`);
  }
  let channels: string[];
  if (ev.channels !== undefined && ev.channel !== undefined) {
    return jsonError(400, `${where}give channel or channels, not both`);
  } else if (ev.channels !== undefined) {
    if (!Array.isArray(ev.channels) || ev.channels.length === 0) return jsonError(400, `${where}channels must be a non-empty array of channel names`);
    channels = ev.channels as string[];
  } else if (ev.channel !== undefined) {
    channels = [ev.channel as string];
  } else {
    return jsonError(400, `${where}channel or channels is required`);
  }
  if (channels.length > app.max_event_channels_at_once) {
    return jsonError(400, `${where}${channels.length} channels given, more than the ${app.max_event_channels_at_once} allowed at once`);
  }
  for (const c of channels) {
    const bad = validateChannelName(c, app.max_channel_name_length);
    // Only a string is quoted back: a non-string can be nested too deeply to serialise (a 500).
    if (bad !== null) return jsonError(400, `${where}invalid channel${typeof c === 'string' ? ' ' + JSON.stringify(c) : ''}: ${bad}`);
  }
  if (channels.length > 1 && new Set(channels).size !== channels.length) return jsonError(400, `${where}channels contains a channel twice`);
  let socketId = '';
  if (ev.socket_id !== undefined && ev.socket_id !== null) {
    if (!isValidSocketId(ev.socket_id)) return jsonError(400, `${where}socket_id must look like "123.456"`);
    socketId = ev.socket_id as string;
  }
  let info: ReadonlySet<string> = NO_INFO;
  if (ev.info !== undefined && ev.info !== null && ev.info !== '') {
    const asked = new Set<string>();
    if (typeof ev.info !== 'string') return jsonError(400, `${where}info must be a comma-separated string`);
    for (const part of ev.info.split(',')) {
      const attr = part.trim();
      if (!EVENT_INFO.has(attr)) return jsonError(400, `${where}info attribute ${JSON.stringify(attr)} is not one of subscription_count, user_count`);
      asked.add(attr);
    }
    // Pusher's HTTP API reference: user_count only for presence channels, and every
    // channel the event goes to must be one (also in a batch item, whose info reports
    // its first channel only: user_count asked of an event to public channels is the
    // same mistake there).
    const other = asked.has('user_count') ? channels.find((c) => !isPresence(c)) : undefined;
    if (other !== undefined) {
      return jsonError(400, `${where}info=user_count exists only for presence channels, and ${JSON.stringify(other)} is not one`);
    }
    info = asked;
  }
  if (ev.delta !== undefined && ev.delta !== null && typeof ev.delta !== 'boolean') return jsonError(400, `${where}delta must be a boolean`);
  const delta = typeof ev.delta === 'boolean' ? ev.delta : undefined;
  const tags = serialiseTags(ev.tags);
  if (!tags.ok) return jsonError(400, `${where}${tags.error}`);
  let key: string | null = null;
  if (ev.idempotency_key !== undefined && ev.idempotency_key !== null) {
    const badKey = invalidKey(ev.idempotency_key);
    if (badKey !== null) return jsonError(400, `${where}${badKey}`);
    key = ev.idempotency_key as string;
  }
  return { name, data, channels, socketId, info, tags: tags.json, delta, key };
}

function isParsed(x: ParsedEvent | ApiResponse): x is ParsedEvent {
  return (x as ParsedEvent).channels !== undefined;
}

/**
 * The messages of one event: one per channel, serialised once each. Tags go along only
 * with tag_filtering.enabled (spec: tags need it; otherwise they are validated and
 * dropped), and into the message as "tags" where the channel's `enable_tags` is set.
 */
function messagesOf(deps: ApiDeps, app: AppConfig, ev: ParsedEvent, into: Outgoing[]): Outgoing[] {
  const tags = deps.config.tag_filtering.enabled ? ev.tags : null;
  for (const channel of ev.channels) {
    let message = frame(ev.name, ev.data, channel);
    if (tags !== null && tagsEnabled(app, channel)) message = message.slice(0, -1) + ',"tags":' + tags + '}';
    into.push({ kind: isServerToUser(channel) ? 'user' : 'api', app: app.id, channel, except: ev.socketId, message, tags, delta: ev.delta });
  }
  return into;
}

async function channelInfo(deps: ApiDeps, app: AppConfig, channel: string, info: ReadonlySet<string>): Promise<Record<string, number>> {
  const r = await deps.directory.info(app.id, channel);
  const out: Record<string, number> = {};
  if (info.has('subscription_count')) out.subscription_count = r.subscription_count;
  if (info.has('user_count') && isPresence(channel)) out.user_count = r.user_count ?? 0;
  return out;
}

function parseBody(body: Buffer): { ok: true; value: unknown } | { ok: false; res: ApiResponse } {
  if (body.length === 0) return { ok: false, res: jsonError(400, 'request body is empty: expected JSON') };
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) };
  } catch {
    return { ok: false, res: jsonError(400, 'request body is not valid JSON') };
  }
}

/** The cluster backend is not taking publishes now (primary/cluster.ts): refused before anything is delivered. */
class ClusterBusy extends Error {}
class ClusterDown extends Error {}

function busy(deps: ApiDeps, err: unknown): ApiResponse {
  if (err instanceof ClusterDown) {
    return { status: 503, body: { error: 'the cluster backend is down: nothing was delivered (adapter.when_down refuse); retry once it is back' }, headers: { 'Retry-After': '1' } };
  }
  if (err instanceof ClusterBusy) {
    return jsonError(503, 'server busy: the cluster backend is not taking publishes now (too many unanswered); nothing was delivered, retry later');
  }
  if (err instanceof BusFullError) {
    metersFor(deps.metrics).busFullAt('api');
    return jsonError(503, 'server busy: internal queues are full, retry later');
  }
  throw err;
}

export function postEvents(deps: ApiDeps, app: AppConfig, body: Buffer): MaybePromise<ApiResponse> {
  const parsed = parseBody(body);
  if (!parsed.ok) return parsed.res;
  const ev = parseEvent(app, parsed.value, '');
  if (!isParsed(ev)) return ev;
  return then(limitBackendEvents(deps, app, ev.channels.length), (overRate) => {
    if (overRate) return overRate;
    if (ev.key !== null && deps.idempotency) return idempotent(deps, app, ev.key, () => publishEvent(deps, app, ev));
    return publishEvent(deps, app, ev);
  });
}

/** The publish hook first (it may refuse or replace data), then all channels or none: a 503 has delivered nothing (channels/publisher.ts). */
function publishEvent(deps: ApiDeps, app: AppConfig, ev: ParsedEvent): MaybePromise<ApiResponse> {
  return then(hooked(deps, app, [ev], false), (evs) => {
    if (!Array.isArray(evs)) return evs;
    let numbered: Promise<void> | null;
    try {
      const msgs: Outgoing[] = [];
      for (const e of evs) messagesOf(deps, app, e, msgs);
      numbered = publishAll(deps, msgs);
    } catch (err) {
      return busy(deps, err);
    }
    return then(numbered ?? undefined, () => (ev.info.size === 0 ? { status: 200, body: PUBLISHED } : eventsInfo(deps, app, ev)));
  });
}

/**
 * Publishes; with history in Redis, the promise the answer waits for until the history
 * channels' messages are numbered (history/redis.ts numbered()). It rejects with
 * HistoryUnavailableError (503) when Redis did not number one: that message was neither
 * stored nor delivered, but the request's other messages may have been.
 */
function publishAll(deps: ApiDeps, msgs: Outgoing[]): Promise<void> | null {
  if (deps.clusterDown?.()) throw new ClusterDown();
  if (deps.clusterBusy?.()) throw new ClusterBusy();
  const history = deps.history;
  if (history?.numbered === undefined) {
    deps.publisher.publish(msgs);
    return null;
  }
  const wait = history.numbered(() => deps.publisher.publish(msgs));
  // tracing on: the wait for Redis to number the history channels' messages, as a span
  if (wait !== null && deps.tracing) return deps.tracing.around('ringcast.history.number', SpanKind.INTERNAL, { [Attr.Messages]: msgs.length }, () => wait, false);
  return wait;
}

/** The publish hook (hooks/publish.ts): the events to publish (data maybe replaced), or the refusal. Synchronous without a hook. */
function hooked(deps: ApiDeps, app: AppConfig, events: ParsedEvent[], batch: boolean): MaybePromise<ParsedEvent[] | ApiResponse> {
  const check = deps.hooks?.check(app, events, batch);
  if (!check) return events;
  return check.then((r) => (r.ok ? r.items : jsonError(r.status, r.error)));
}

const IN_PROGRESS = 'a request with this idempotency_key is still being answered: retry';

/** A key first used on the other route: 422, nothing delivered (`where`: the batch item, or ''). */
function otherRoute(where: string, key: string, first: IdemRoute, here: IdemRoute): ApiResponse {
  return jsonError(422, `${where}idempotency_key ${JSON.stringify(key)} was first used on POST /apps/{app_id}/${first}, `
    + `not ${here}: a key belongs to one route; nothing was delivered`);
}

/** A claim that failed: 503, nothing delivered; naming the store when the cluster-wide window's Redis or NATS failed. */
function unanswered(err: unknown): ApiResponse {
  if (isIdempotencyDown(err)) return jsonError(503, `${err.message}: nothing was delivered, retry later`);
  return jsonError(503, 'server busy: the idempotency window did not answer, retry later');
}

/**
 * A publish with an idempotency_key: the first one publishes and its 2xx answer is kept
 * for the window; a repeat gets that answer and delivers nothing. Anything else (a 503: it
 * delivered nothing) frees the key, so a retry publishes.
 */
async function idempotent(deps: ApiDeps, app: AppConfig, key: string, run: () => MaybePromise<ApiResponse>): Promise<ApiResponse> {
  const idem = deps.idempotency!;
  let claim: IdemReply;
  try {
    claim = await idem.claim(app.id, key, 'events');
  } catch (err) {
    return unanswered(err);
  }
  if (claim.state === 'conflict') return otherRoute('', key, claim.route, 'events');
  if (claim.state === 'pending') return jsonError(503, IN_PROGRESS);
  if (claim.state === 'done') {
    deps.metrics.inc('idempotent_hits_total', { app_id: app.id });
    return { status: claim.status, body: claim.body };
  }
  let res: ApiResponse;
  try {
    res = await run();
  } catch (err) {
    idem.release(app.id, key);
    throw err;
  }
  if (res.status >= 200 && res.status < 300) idem.done(app.id, key, res.status, res.body, 'events');
  else idem.release(app.id, key);
  return res;
}

async function eventsInfo(deps: ApiDeps, app: AppConfig, ev: ParsedEvent): Promise<ApiResponse> {
  const channels: Record<string, Record<string, number>> = {};
  await Promise.all(ev.channels.map(async (c) => { channels[c] = await channelInfo(deps, app, c, ev.info); }));
  return { status: 200, body: { channels } };
}

export function postBatchEvents(deps: ApiDeps, app: AppConfig, body: Buffer): MaybePromise<ApiResponse> {
  const parsed = parseBody(body);
  if (!parsed.ok) return parsed.res;
  const batch = (parsed.value as { batch?: unknown } | null)?.batch;
  if (!Array.isArray(batch)) return jsonError(400, 'batch must be an array of events');
  if (batch.length > app.max_event_batch_size) {
    return jsonError(400, `batch has ${batch.length} events, more than the ${app.max_event_batch_size} allowed`);
  }
  const events: ParsedEvent[] = [];
  for (let i = 0; i < batch.length; i++) {
    const ev = parseEvent(app, batch[i], `batch[${i}]: `);
    if (!isParsed(ev)) return ev;
    events.push(ev);
  }
  const firstWith = new Map<string, number>();
  for (let i = 0; i < events.length; i++) {
    const k = events[i].key;
    if (k === null) continue;
    const j = firstWith.get(k);
    if (j !== undefined) return jsonError(400, `batch[${i}]: idempotency_key is the same as batch[${j}]'s`);
    firstWith.set(k, i);
  }
  return then(limitBackendEvents(deps, app, events.reduce((n, ev) => n + ev.channels.length, 0)), (overRate) => {
    if (overRate) return overRate;
    if (firstWith.size > 0 && deps.idempotency) return idempotentBatch(deps, app, events);
    return publishBatch(deps, app, events);
  });
}

function publishBatch(deps: ApiDeps, app: AppConfig, events: ParsedEvent[]): MaybePromise<ApiResponse> {
  return then(hooked(deps, app, events, true), (evs) => {
    if (!Array.isArray(evs)) return evs;
    let numbered: Promise<void> | null;
    try {
      // The whole batch or nothing: a 503 has delivered no event of it (but see publishAll).
      const msgs: Outgoing[] = [];
      for (const ev of evs) messagesOf(deps, app, ev, msgs);
      numbered = publishAll(deps, msgs);
    } catch (err) {
      return busy(deps, err);
    }
    return then(numbered ?? undefined, () => (events.every((ev) => ev.info.size === 0)
      ? { status: 200, body: { batch: events.map(() => ({})) } } : batchInfo(deps, app, events)));
  });
}

/**
 * A batch with idempotency_keys: each item's key is claimed; items already answered are
 * not delivered again and answer their first answer; the others go out together (all or
 * nothing, as any batch) and their answers are kept. Any failure frees the claimed keys.
 */
async function idempotentBatch(deps: ApiDeps, app: AppConfig, events: ParsedEvent[]): Promise<ApiResponse> {
  const idem = deps.idempotency!;
  let failure: unknown = null;
  const claims = await Promise.all(events.map((ev) => (ev.key === null ? Promise.resolve(null)
    : idem.claim(app.id, ev.key, 'batch_events').catch((err: unknown) => { failure = err; return null; }))));
  const claimed = events.filter((ev, i) => ev.key !== null && claims[i]?.state === 'new').map((ev) => ev.key!);
  const releaseAll = () => { for (const k of claimed) idem.release(app.id, k); };
  const conflict = claims.findIndex((c) => c?.state === 'conflict');
  if (conflict >= 0) {
    releaseAll();
    return otherRoute(`batch[${conflict}]: `, events[conflict].key!, (claims[conflict] as { route: IdemRoute }).route, 'batch_events');
  }
  if (claims.some((c, i) => events[i].key !== null && (c === null || c.state === 'pending'))) {
    releaseAll();
    return claims.some((c) => c?.state === 'pending') ? jsonError(503, IN_PROGRESS) : unanswered(failure);
  }
  const fresh = events.filter((_, i) => claims[i] === null || claims[i].state === 'new');
  let res: ApiResponse;
  try {
    res = fresh.length === 0 ? { status: 200, body: { batch: [] } } : await publishBatch(deps, app, fresh);
  } catch (err) {
    releaseAll();
    throw err;
  }
  if (res.status < 200 || res.status >= 300) {
    releaseAll();
    return res;
  }
  // Delivered: every claimed key gets its answer first, so none stays pending whatever follows.
  const answers = (res.body as { batch: unknown[] }).batch;
  const items = fresh.map((_, j) => answers[j] ?? {});
  fresh.forEach((ev, j) => { if (ev.key !== null) idem.done(app.id, ev.key, 200, { batch: [items[j]] }, 'batch_events'); });
  const out: unknown[] = [];
  let next = 0;
  events.forEach((ev, i) => {
    const c = claims[i];
    if (c !== null && c.state === 'done') {
      deps.metrics.inc('idempotent_hits_total', { app_id: app.id });
      out.push((c.body as { batch?: unknown[] } | null)?.batch?.[0] ?? {});
      return;
    }
    out.push(items[next++]);
  });
  return { status: 200, body: { batch: out } };
}

async function batchInfo(deps: ApiDeps, app: AppConfig, events: ParsedEvent[]): Promise<ApiResponse> {
  const out = await Promise.all(events.map((ev) =>
    ev.info.size === 0 ? Promise.resolve({}) : channelInfo(deps, app, ev.channels[0], ev.info)));
  return { status: 200, body: { batch: out } };
}
