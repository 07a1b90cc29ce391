// GET /apps/{app_id}/channels/{channel_name}/history (docs/protocol.md "REST history"): one page
// of a history channel's stored messages, answered by the channel's owner (hist_page).
// Query: limit (1–1000, default 100), direction backwards (default, newest first) |
// forwards, after_serial / before_serial, cursor (from a previous answer's next_cursor:
// the same query, going on after its last item, in the same epoch).

import type { HistPageReply } from '../bus/messages';
import type { AppConfig } from '../config/types';
import type { HistorySettings } from './settings';

export interface RestHistory {
  settings: HistorySettings;
  page(app: string, channel: string, q: { limit: number; direction: 'backwards' | 'forwards'; after: number; before: number | null }): Promise<HistPageReply>;
  /**
   * history.driver redis / redis-cluster (history/redis.ts numbered()): runs an API publish
   * and returns what it waits for until its history channel messages are numbered (null:
   * none, or the memory driver, which numbers them behind the answer in the owner shard).
   */
  numbered?(publish: () => void): Promise<void> | null;
}

export interface Answer { status: number; body: unknown }

const MAX_LIMIT = 1000;
const bad = (error: string): Answer => ({ status: 400, body: { error } });

interface Cursor { e: string; d: 'backwards' | 'forwards'; a: number; b: number | null }

function serialParam(params: ReadonlyMap<string, string>, name: string): number | null | Answer {
  const raw = params.get(name);
  if (raw === undefined) return null;
  if (!/^\d{1,15}$/.test(raw)) return bad(`${name} must be a non-negative integer, got ${JSON.stringify(raw.slice(0, 40))}`);
  return Number(raw);
}

function readCursor(raw: string): Cursor | null {
  try {
    const c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    const serial = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
    if (typeof c.e === 'string' && (c.d === 'backwards' || c.d === 'forwards') && serial(c.a) && (c.b === null || serial(c.b))) return c;
  } catch { /* not a cursor */ }
  return null;
}

export async function getHistory(h: RestHistory, app: AppConfig, channel: string, params: ReadonlyMap<string, string>): Promise<Answer> {
  if (h.settings.of(app.id, channel) === null) {
    const patterns = Object.keys(app.channel_history);
    return bad(`channel ${JSON.stringify(channel)} has no history: no pattern of the app's channel_history matches it (patterns: ${patterns.length === 0 ? 'none' : patterns.join(', ')})`);
  }
  const rawLimit = params.get('limit') ?? '100';
  const limit = /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : NaN;
  if (!(limit >= 1 && limit <= MAX_LIMIT)) return bad(`limit must be an integer from 1 to ${MAX_LIMIT}, got ${JSON.stringify(rawLimit.slice(0, 40))}`);
  const direction = params.get('direction') ?? 'backwards';
  if (direction !== 'backwards' && direction !== 'forwards') return bad(`direction must be backwards or forwards, got ${JSON.stringify(direction.slice(0, 40))}`);
  const after = serialParam(params, 'after_serial');
  if (after !== null && typeof after !== 'number') return after;
  const before = serialParam(params, 'before_serial');
  if (before !== null && typeof before !== 'number') return before;
  let q: { limit: number; direction: Cursor['d']; after: number; before: number | null } = { limit, direction, after: after ?? 0, before };
  let epoch: string | null = null;
  const rawCursor = params.get('cursor');
  if (rawCursor !== undefined) {
    const c = readCursor(rawCursor);
    if (c === null) return bad('cursor is not one this server gave (use next_cursor of a previous answer as is)');
    q = { limit, direction: c.d, after: c.a, before: c.b };
    epoch = c.e;
  }
  const page = await h.page(app.id, channel, q);
  if (epoch !== null && epoch !== page.epoch) return bad(`cursor is from epoch ${epoch}, but the channel's numbering is now epoch ${page.epoch} (it was reset): start again without cursor`);
  const items = page.items.map((m) => {
    const f = JSON.parse(m.message) as { event: string; data?: unknown; user_id?: unknown };
    const item: Record<string, unknown> = { serial: m.serial, event: f.event, data: f.data, time_ms: m.timeMs };
    if (f.user_id !== undefined) item.user_id = f.user_id;
    return item;
  });
  let next: string | null = null;
  if (page.more && page.items.length > 0) {
    const last = page.items[page.items.length - 1].serial;
    const c: Cursor = q.direction === 'forwards' ? { e: page.epoch, d: 'forwards', a: last, b: q.before } : { e: page.epoch, d: 'backwards', a: q.after, b: last };
    next = Buffer.from(JSON.stringify(c)).toString('base64url');
  }
  return { status: 200, body: { epoch: page.epoch, items, next_cursor: next } };
}
