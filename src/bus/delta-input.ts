// The input a delta-route stage (or the primary, with cluster_coordination) writes to the
// delta sequencer: a Publish frame whose message is [u8 Force][envelope utf8], so that a
// publish's `"delta": true|false` travels without a header field of its own; with a
// cluster-agreed stream position, [u8 Force|STAMPED][f64 LE position][envelope]
// (delta/coord.ts). Here, below channels/ and adapter/, because both write it.

/** First byte of a message a delta-route stage writes to the sequencer. */
export const Force = { None: 0, Delta: 1, Full: 2 } as const;
export type Force = (typeof Force)[keyof typeof Force];

/** Flag on the first byte: a stream position (f64 LE) follows (cluster_coordination). */
export const STAMPED = 0x80;

/**
 * Flag on the first byte: a history channel's serial and epoch follow; the owner shard of
 * the channel writes it once the message is numbered (history/owner.ts). Never with STAMPED.
 */
export const SERIAL = 0x40;

/** The sequencer's input of a numbered history channel message: [u8 Force|SERIAL][f64 LE serial][u8 n][epoch: n bytes][envelope]. */
export function serialInput(force: number, serial: number, epoch: string, envelope: string): Uint8Array {
  const n = Buffer.byteLength(epoch);
  if (n > 255) throw new RangeError(`history epoch too long (${n} bytes)`);
  const out = Buffer.allocUnsafe(10 + n + Buffer.byteLength(envelope));
  out[0] = force | SERIAL;
  out.writeDoubleLE(serial, 1);
  out[9] = n;
  out.write(epoch, 10, 'utf8');
  out.write(envelope, 10 + n, 'utf8');
  return out;
}

/** serialInput's serial, epoch and where its envelope starts. */
export function readSerialInput(message: Uint8Array): { serial: number; epoch: string; at: number } {
  const b = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const n = b[9];
  return { serial: b.readDoubleLE(1), epoch: b.toString('utf8', 10, 10 + n), at: 10 + n };
}

/** The sequencer's input with a cluster-wide stream position (position < 0: none, decided locally). */
export function stampedInput(force: number, position: number, envelope: string): Uint8Array {
  if (position < 0) {
    const out = Buffer.allocUnsafe(1 + Buffer.byteLength(envelope));
    out[0] = force;
    out.write(envelope, 1, 'utf8');
    return out;
  }
  const out = Buffer.allocUnsafe(9 + Buffer.byteLength(envelope));
  out[0] = force | STAMPED;
  out.writeDoubleLE(position, 1);
  out.write(envelope, 9, 'utf8');
  return out;
}

export function forceOf(delta: boolean | undefined): Force {
  return delta === true ? Force.Delta : delta === false ? Force.Full : Force.None;
}
