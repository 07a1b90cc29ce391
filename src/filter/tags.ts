// The `tags` of a published event: an object of string to string. Validated once by the
// thread that takes the API request, and serialised once with sorted keys: the same string
// travels in the publish frame's header (bus/messages.ts) for the shards' filter stage and
// is what `enable_tags` adds to the delivered message as "tags".

/** Largest serialised tag object: the frame's tag section has a u16 length (0xffff is a marker). */
export const MAX_TAGS_BYTES = 0xfffe;

export type TagsResult = { ok: true; json: string | null } | { ok: false; error: string };

/** `json` is null for absent, null or empty tags: such an event is untagged. */
export function serialiseTags(raw: unknown): TagsResult {
  if (raw === undefined || raw === null) return { ok: true, json: null };
  if (typeof raw !== 'object' || Array.isArray(raw)) return { ok: false, error: 'tags must be an object of string keys to string values' };
  const obj = raw as Record<string, unknown>;
  const keys = Object.keys(obj).sort();
  if (keys.length === 0) return { ok: true, json: null };
  let json = '{';
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const v = obj[k];
    if (k.length === 0) return { ok: false, error: 'tags: a tag name must not be empty' };
    if (typeof v !== 'string') {
      return { ok: false, error: `tags.${k} must be a string (tag values are strings; numeric filters parse them), not ${v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v}` };
    }
    json += (i === 0 ? '' : ',') + JSON.stringify(k) + ':' + JSON.stringify(v);
  }
  json += '}';
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_TAGS_BYTES) return { ok: false, error: `tags are ${bytes} bytes serialised, more than the ${MAX_TAGS_BYTES} allowed` };
  return { ok: true, json };
}

/** The tags of a frame's tag section (the string serialiseTags made) and their pairs. */
export function parseTags(json: string): { tags: Readonly<Record<string, string>>; pairs: [string, string][] } {
  const tags = JSON.parse(json) as Record<string, string>;
  return { tags, pairs: Object.entries(tags) };
}
