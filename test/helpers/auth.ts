// Channel subscription signatures computed in the test itself with node:crypto (as an
// application's auth endpoint would), never with the server's own helpers.

import { createHmac } from 'node:crypto';

/** `key:hex(hmac_sha256(secret, socket_id:channel[:channel_data]))`. */
export function sign(app: { key: string; secret: string }, socketId: string, channel: string, channelData?: string): string {
  const str = channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
  return `${app.key}:${createHmac('sha256', app.secret).update(str).digest('hex')}`;
}
