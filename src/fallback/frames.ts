// The HTTP fallback wire (pusher-js xhr_streaming / xhr_polling, SockJS-derived), in one
// pure place. The wire as served: docs/fallback.md "Endpoints" (read from pusher-js 8.6).
//
// Receive responses are lines ended by a bare "\n" (pusher-js splits on "\n" only and
// JSON.parses the rest of each line, so "\r" would break it):
//   o              the session is open: once per session, never again ("Server lost session")
//   h              heartbeat (streaming: the client answers with an xhr_send of [])
//   a[...]         an array of JSON strings, each one Pusher frame
//   c[code,"why"]  the session is closed
// xhr_send bodies are a JSON array of strings, one Pusher frame each; [] is a heartbeat.

export const OPEN = 'o\n';
export const HEARTBEAT = 'h\n';

/** pusher-js aborts a stream and reopens it in that same HTTP session past this many characters (http_request.ts MAX_BUFFER_LENGTH). */
export const CLIENT_STREAM_LIMIT = 256 * 1024;

/** The fallback transports, as named in the URL. */
export type Transport = 'xhr_streaming' | 'xhr' | 'xhr_send';
export const TRANSPORTS: readonly Transport[] = ['xhr_streaming', 'xhr', 'xhr_send'];

/** One `a` line of frames already encoded as JSON strings (encodeFrame). */
export function messages(encoded: readonly string[]): string {
  return 'a[' + encoded.join(',') + ']\n';
}

/** A Pusher frame as an element of an `a` line. */
export function encodeFrame(text: string): string {
  return JSON.stringify(text);
}

export function close(code: number, reason: string): string {
  return 'c' + JSON.stringify([code, reason]) + '\n';
}

/** Session ids as pusher-js makes them are 8 characters of [0-9a-v]; any short token is taken. */
const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
export function validSessionId(id: string): boolean {
  return SESSION_ID.test(id);
}

export type SendBody = { frames: string[] } | { status: number; error: string };

/** Reads an xhr_send body: the frames, or the status and message of what is wrong with it. */
export function parseSendBody(body: string): SendBody {
  if (body.length === 0) return { status: 400, error: 'Payload expected: a JSON array of strings' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { status: 400, error: 'Broken JSON encoding' };
  }
  if (!Array.isArray(parsed)) return { status: 400, error: 'Payload must be a JSON array of strings' };
  for (let i = 0; i < parsed.length; i++) {
    if (typeof parsed[i] !== 'string') return { status: 400, error: `Payload element ${i} is not a string` };
  }
  return { frames: parsed as string[] };
}

/** Which shard holds a session: every shard computes the same one from the id (FNV-1a). */
export function homeShard(sessionId: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i++) {
    h ^= sessionId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}
