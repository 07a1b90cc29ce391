// ws.send of one protocol frame to one socket, counted (messages_sent_total{event}, bytes,
// drops at the backpressure limit). Returns uWS's status: 0 backpressure, 1 sent, 2 dropped.

import type { Meters } from '../metrics/meters';
import type { Socket } from './types';

export function sendFrame(meters: Meters, ws: Socket, appId: string, canonicalEvent: string, text: string): number {
  const status = ws.send(text, false);
  if (meters.enabled) meters.sent(appId, canonicalEvent, status, Buffer.byteLength(text));
  return status;
}
