// Names shared by every place that hands a channel to uWS or hashes it.

/** uWS topic of a channel. Channel names never contain a space, so this is unambiguous. */
export function topicOf(app: string, channel: string): string {
  return app + ' ' + channel;
}

/**
 * FNV-1a over app, a 0 byte and channel (UTF-16 code units). The owner of a channel is
 * `channelHash % shards` (channels/owner.ts); its interest slot is the low bits
 * (channels/interest.ts).
 */
export function channelHash(app: string, channel: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < app.length; i++) {
    h ^= app.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h = Math.imul(h, 0x01000193); // the separator byte (0)
  for (let i = 0; i < channel.length; i++) {
    h ^= channel.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
