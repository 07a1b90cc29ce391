// Delta decoding for ringcast's delta compression (docs/protocol.md, "Delta compression"),
// independent of any client library: feed it every raw frame the socket receives, in
// order, and it tells what to deliver and what to answer.
//
//   full message    {"event":E,"channel":C,"data":…,"__delta_seq":N[,"__conflation_key":V]}
//                   → becomes the base of stream (C, E, V): the text without the `__` fields
//                   (a history channel's, to a subscription with positions: `,"__serial":S` after them)
//   pusher:delta    {"event":"pusher:delta","channel":C,"data":{event,delta,seq,base_index,
//                   algorithm?,conflation_key?,serial?}} → base_index must be the stream's base;
//                   the delta (base64) applied to the base gives the new envelope byte for
//                   byte; it becomes the new base
//   delta_cache_sync  {"conflation_key":K,"states":{V:[{content,seq}…]}}: bases at once
//   anything wrong  → a sync error for the channel: its bases go, the server resends full
//
// The xdelta3 decoder is passed in (standard VCDIFF, RFC 3284): createDeltaDecoder loads
// vcdiff-wasm's for you when asked.

import { applyDelta } from 'fossil-delta';

const enc = new TextEncoder();
const dec = new TextDecoder();
const SEQ_FIELD = ',"__delta_seq":';

function fromBase64(s) {
  if (typeof Buffer !== 'undefined') return new Uint8Array(Buffer.from(s, 'base64'));
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function isEvent(name, suffix) {
  return name === 'pusher:' + suffix || name === 'proto:' + suffix;
}

export class DeltaDecoder {
  /**
   * @param {{algorithm?: string, xdelta3?: (base: Uint8Array, delta: Uint8Array) => Uint8Array}} opts
   *   algorithm: the one to assume when a delta leaves it out (omit_delta_algorithm);
   *   pusher:delta_compression_enabled sets it too.
   */
  constructor(opts = {}) {
    this.algorithm = opts.algorithm ?? 'fossil';
    this.xdelta3 = opts.xdelta3 ?? null;
    /** channel → Map(stream key → {seq, bytes}) */
    this.bases = new Map();
    this.stats = { full: 0, deltas: 0, syncErrors: 0, deltaBytes: 0 };
  }

  /**
   * One raw frame. Returns null (nothing for the caller: the library delivers it as is),
   * {type: 'event', channel, event, data, envelope} (deliver this decoded event),
   * or {type: 'sync_error', channel} (send pusher:delta_sync_error {channel}).
   */
  receive(text) {
    const at = text.lastIndexOf(SEQ_FIELD);
    if (at > 0) return this.full(text, at);
    if (text.indexOf('delta', 0) < 0) return null; // neither pusher:delta nor its cache sync
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return null;
    }
    if (typeof msg?.event !== 'string') return null;
    if (isEvent(msg.event, 'delta')) return this.delta(msg);
    if (isEvent(msg.event, 'delta_cache_sync')) return this.cacheSync(msg);
    if (isEvent(msg.event, 'delta_compression_enabled')) {
      const d = typeof msg.data === 'string' ? JSON.parse(msg.data) : msg.data;
      if (d?.algorithm) this.algorithm = d.algorithm;
    }
    return null;
  }

  /** Forgets a channel's bases (unsubscribe, sync error). */
  reset(channel) {
    this.bases.delete(channel);
  }

  streams(channel) {
    let m = this.bases.get(channel);
    if (!m) {
      m = new Map();
      this.bases.set(channel, m);
    }
    return m;
  }

  full(text, at) {
    const envelope = text.slice(0, at) + '}';
    let tail, head;
    try {
      tail = JSON.parse('{' + text.slice(at + 1));
      head = JSON.parse(envelope);
    } catch {
      return null;
    }
    if (typeof head.channel !== 'string') return null;
    const key = head.event + '\0' + (tail.__conflation_key ?? '');
    this.streams(head.channel).set(key, { seq: tail.__delta_seq, bytes: enc.encode(envelope) });
    this.stats.full++;
    return null;
  }

  delta(msg) {
    const channel = msg.channel;
    const d = typeof msg.data === 'string' ? JSON.parse(msg.data) : msg.data;
    if (typeof channel !== 'string' || !d || typeof d.event !== 'string') return null;
    const streams = this.streams(channel);
    const key = d.event + '\0' + (d.conflation_key ?? '');
    const base = streams.get(key);
    if (!base || base.seq !== d.base_index) return this.syncError(channel);
    let target;
    try {
      const delta = fromBase64(d.delta);
      this.stats.deltaBytes += delta.length;
      const algorithm = d.algorithm ?? this.algorithm;
      if (algorithm === 'fossil') target = applyDelta(base.bytes, delta);
      else if (algorithm === 'xdelta3' && this.xdelta3) target = this.xdelta3(base.bytes, delta);
      else return this.syncError(channel);
    } catch {
      return this.syncError(channel);
    }
    const bytes = target instanceof Uint8Array ? target : Uint8Array.from(target);
    const envelope = dec.decode(bytes);
    let parsed;
    try {
      parsed = JSON.parse(envelope);
    } catch {
      return this.syncError(channel);
    }
    streams.set(key, { seq: d.seq, bytes });
    this.stats.deltas++;
    // serial: a history channel's, for a subscription with positions (docs/protocol.md)
    return { type: 'event', channel, event: parsed.event, data: parsed.data, envelope, userId: parsed.user_id, serial: d.serial };
  }

  cacheSync(msg) {
    const channel = msg.channel;
    let d = msg.data;
    try {
      if (typeof d === 'string') d = JSON.parse(d);
    } catch {
      return null;
    }
    if (typeof channel !== 'string' || !d || typeof d.states !== 'object') return null;
    const streams = this.streams(channel);
    for (const [value, entries] of Object.entries(d.states)) {
      for (const e of entries) {
        let event;
        try {
          event = JSON.parse(e.content).event;
        } catch {
          continue;
        }
        streams.set(event + '\0' + value, { seq: e.seq, bytes: enc.encode(e.content) });
      }
    }
    return null;
  }

  syncError(channel) {
    this.reset(channel);
    this.stats.syncErrors++;
    return { type: 'sync_error', channel };
  }
}

/** A decoder; `xdelta3: true` loads vcdiff-wasm's decoder (standard VCDIFF) first. */
export async function createDeltaDecoder(opts = {}) {
  let xdelta3 = typeof opts.xdelta3 === 'function' ? opts.xdelta3 : null;
  if (opts.xdelta3 === true) {
    const mod = await import('vcdiff-wasm/decoder.js');
    const load = typeof mod.default === 'function' ? mod.default : mod;
    xdelta3 = await load();
  }
  return new DeltaDecoder({ algorithm: opts.algorithm, xdelta3 });
}
