// A subscribe's `recover` field checked, and the topics of a history channel's
// subscriptions (history/shard.ts): with positions (frames carry __serial), and waiting for
// their answer.

import { topicOf } from '../channels/topic';

/** A subscribe's `recover`, checked: absent, positions only, a resume position, or refused. */
export type Recover =
  | { kind: 'none' }
  | { kind: 'positions' }
  | { kind: 'resume'; epoch: string; serial: number }
  | { kind: 'invalid'; error: string };

const NONE: Recover = { kind: 'none' };
const MAX_EPOCH_LENGTH = 64;

export function parseRecover(v: unknown): Recover {
  if (v === undefined || v === null) return NONE;
  if (typeof v !== 'object' || Array.isArray(v)) return { kind: 'invalid', error: 'recover must be an object: {} or {"epoch":"…","serial":N}' };
  const r = v as { epoch?: unknown; serial?: unknown };
  if (r.epoch === undefined && r.serial === undefined) return { kind: 'positions' };
  if (typeof r.epoch !== 'string' || r.epoch.length === 0 || r.epoch.length > MAX_EPOCH_LENGTH) {
    return { kind: 'invalid', error: `recover.epoch must be a string of 1 to ${MAX_EPOCH_LENGTH} characters` };
  }
  if (typeof r.serial !== 'number' || !Number.isSafeInteger(r.serial) || r.serial < 0) {
    return { kind: 'invalid', error: 'recover.serial must be a non-negative integer' };
  }
  return { kind: 'resume', epoch: r.epoch, serial: r.serial };
}

/** The topic of a channel's subscriptions with positions (frames with __serial). */
export function serialTopicOf(app: string, channel: string): string {
  return topicOf(app, channel) + '\0s';
}

/** The topic of a channel's history subscriptions waiting for their answer: member events and counts only. */
export function pendingTopicOf(app: string, channel: string): string {
  return topicOf(app, channel) + '\0p';
}
