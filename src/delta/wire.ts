// Wire shapes of delta compression (docs/protocol.md, "Delta compression") and the private
// convention between a shard's delta-route stage and the sequencer.
//
//   full message to a delta socket   the envelope with `,"__delta_seq":N` (and
//                                    `,"__conflation_key":"V"` when the channel has a key)
//                                    inserted before the final `}`
//   delta message                    {"event":"pusher:delta","channel":C,"data":{"event":E,
//                                    "delta":"<base64>","seq":N,"base_index":M,
//                                    "algorithm":"fossil","conflation_key":"V"}}
//                                    (algorithm left out with omit_delta_algorithm)
//   the delta                        turns the base envelope (no `__` fields) into the new
//                                    envelope, byte for byte
//
// Stage → sequencer: a Publish frame whose message is [u8 Force][envelope utf8], so that a
// publish's `"delta": true|false` travels without a header field of its own. With
// cluster_coordination the primary writes [u8 Force|STAMPED][f64 LE position][envelope]:
// the stream position the cluster agreed on (delta/coord.ts).

import type { Algo } from './settings';

export { Force, forceOf, readSerialInput, SERIAL, serialInput, STAMPED, stampedInput } from '../bus/delta-input';

/** The envelope as a delta socket receives it in full. */
export function fullMessage(envelope: string, seq: number, conflationValue: string | null): string {
  let tail = ',"__delta_seq":' + seq;
  if (conflationValue !== null) tail += ',"__conflation_key":' + JSON.stringify(conflationValue);
  return envelope.slice(0, -1) + tail + '}';
}

/** The envelope of a full message (fullMessage's output) without its `__` fields: the plain message. */
export function plainMessage(full: string): string {
  const at = full.lastIndexOf(',"__delta_seq":');
  return at < 0 ? full : full.slice(0, at) + '}';
}

export function deltaMessage(
  deltaEvent: string, channel: string, event: string, delta: Uint8Array, seq: number, baseIndex: number,
  algorithm: Algo | null, conflationValue: string | null,
): string {
  let data = '{"event":' + JSON.stringify(event) + ',"delta":"' + Buffer.from(delta.buffer, delta.byteOffset, delta.byteLength).toString('base64') +
    '","seq":' + seq + ',"base_index":' + baseIndex;
  if (algorithm !== null) data += ',"algorithm":"' + algorithm + '"';
  if (conflationValue !== null) data += ',"conflation_key":' + JSON.stringify(conflationValue);
  return '{"event":' + JSON.stringify(deltaEvent) + ',"channel":' + JSON.stringify(channel) + ',"data":' + data + '}}';
}

/** A frame with `,"__serial":N` inserted before its final `}` (history channels, docs/protocol.md). */
export function withSerial(message: string, serial: number): string {
  return message.slice(0, -1) + ',"__serial":' + serial + '}';
}

/** A pusher:delta (deltaMessage's output) with `,"serial":N` at the end of its data (history channels, docs/protocol.md). */
export function deltaWithSerial(delta: string, serial: number): string {
  return delta.slice(0, -2) + ',"serial":' + serial + '}}';
}

/**
 * The conflation value of a message: the value at the dotted `path` of its `data` (parsed
 * when `data` is a JSON string). Strings as they are, numbers and booleans as text; a
 * missing path or an object or array there gives '' (one group for such messages).
 */
export function conflationValueOf(data: unknown, path: readonly string[]): string {
  let v: unknown = data;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return '';
    }
  }
  for (const p of path) {
    if (v === null || typeof v !== 'object') return '';
    v = (v as Record<string, unknown>)[p];
  }
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return '';
}
