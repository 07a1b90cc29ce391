// open-vcdiff's interleaved VCDIFF → standard RFC 3284 VCDIFF.
//
// vcdiff-wasm's encoder (open-vcdiff) writes the format variant with version byte 'S'
// (d6 c3 c4 53): every window keeps its data, instructions and addresses in one
// interleaved section. Strict RFC 3284 decoders (xdelta3 -d, @ably/vcdiff-decoder) refuse
// it. The instructions are the same, so this splits each window back into the three
// sections of the standard format (version byte 0):
//
//   window   Win_Indicator [source size, source position] delta-length
//            target-length Delta_Indicator data-length inst-length addr-length
//            [Adler-32: open-vcdiff's extension, bit 0x04, dropped here]
//            data | instructions | addresses
//
// Walking the instructions needs the default code table (RFC 3284 §5.6) and the order in
// which open-vcdiff interleaves: opcode, then per instruction of the pair its size (when
// the table gives 0) followed by its payload (ADD: the bytes, RUN: one byte, COPY: the
// address, one byte in the "same" modes 6–8, a varint otherwise).

const NOOP = 0, ADD = 1, RUN = 2, COPY = 3;
const S_NEAR = 4;

/** [inst1, size1, mode1, inst2, size2, mode2] per opcode. */
const TABLE: number[][] = buildDefaultTable();

function buildDefaultTable(): number[][] {
  const t: number[][] = [[RUN, 0, 0, NOOP, 0, 0]];
  for (let s = 0; s <= 17; s++) t.push([ADD, s, 0, NOOP, 0, 0]);
  for (let m = 0; m <= 8; m++) {
    t.push([COPY, 0, m, NOOP, 0, 0]);
    for (let s = 4; s <= 18; s++) t.push([COPY, s, m, NOOP, 0, 0]);
  }
  for (let m = 0; m <= 5; m++) for (let a = 1; a <= 4; a++) for (let c = 4; c <= 6; c++) t.push([ADD, a, 0, COPY, c, m]);
  for (let m = 6; m <= 8; m++) for (let a = 1; a <= 4; a++) t.push([ADD, a, 0, COPY, 4, m]);
  for (let m = 0; m <= 8; m++) t.push([COPY, 4, m, ADD, 1, 0]);
  if (t.length !== 256) throw new Error(`VCDIFF default code table has ${t.length} entries`);
  return t;
}

export class VcdiffFormatError extends Error {
  readonly code = 'RC_ERR_VCDIFF';
}

class Reader {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}
  byte(): number {
    if (this.pos >= this.buf.length) throw new VcdiffFormatError('VCDIFF: unexpected end');
    return this.buf[this.pos++];
  }
  varint(): number {
    let v = 0;
    for (let i = 0; i < 5; i++) {
      const b = this.byte();
      v = v * 128 + (b & 0x7f);
      if ((b & 0x80) === 0) return v;
    }
    throw new VcdiffFormatError('VCDIFF: varint too long');
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw new VcdiffFormatError('VCDIFF: unexpected end');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

class Writer {
  private chunks: number[] = [];
  byte(b: number): void {
    this.chunks.push(b);
  }
  varint(v: number): void {
    const tmp: number[] = [v & 0x7f];
    v = Math.floor(v / 128);
    while (v > 0) {
      tmp.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    for (let i = tmp.length - 1; i >= 0; i--) this.chunks.push(tmp[i]);
  }
  bytes(b: Uint8Array): void {
    for (let i = 0; i < b.length; i++) this.chunks.push(b[i]);
  }
  get length(): number {
    return this.chunks.length;
  }
  out(): Uint8Array {
    return Uint8Array.from(this.chunks);
  }
}

/** Standard RFC 3284 bytes for `delta`; a delta already standard is returned as is. */
export function toStandardVcdiff(delta: Uint8Array): Uint8Array {
  if (delta.length < 5 || delta[0] !== 0xd6 || delta[1] !== 0xc3 || delta[2] !== 0xc4) throw new VcdiffFormatError('VCDIFF: bad magic');
  if (delta[3] === 0) return delta;
  if (delta[3] !== 0x53) throw new VcdiffFormatError(`VCDIFF: unknown version byte ${delta[3]}`);
  const r = new Reader(delta);
  r.pos = 4;
  const hdr = r.byte();
  if ((hdr & 0x03) !== 0) throw new VcdiffFormatError('VCDIFF: secondary compression or a custom code table is not supported');
  const out = new Writer();
  out.bytes(Uint8Array.of(0xd6, 0xc3, 0xc4, 0x00, hdr & ~0x04));
  if ((hdr & 0x04) !== 0) r.bytes(r.varint()); // application header: dropped
  while (r.pos < delta.length) window(r, out);
  return out.out();
}

function window(r: Reader, out: Writer): void {
  const win = r.byte();
  out.byte(win & 0x03); // VCD_SOURCE / VCD_TARGET; the checksum bit goes
  if ((win & 0x03) !== 0) {
    out.varint(r.varint()); // source segment size
    out.varint(r.varint()); // source segment position
  }
  const deltaLength = r.varint();
  const end = r.pos + deltaLength;
  const targetLength = r.varint();
  const deltaIndicator = r.byte();
  if (deltaIndicator !== 0) throw new VcdiffFormatError('VCDIFF: compressed sections are not supported');
  const dataLen = r.varint();
  const instLen = r.varint();
  const addrLen = r.varint();
  if ((win & 0x04) !== 0) r.varint(); // open-vcdiff's Adler-32 of the target window
  const data = new Writer();
  const inst = new Writer();
  const addr = new Writer();
  if (dataLen === 0 && addrLen === 0) {
    const s = new Reader(r.bytes(instLen));
    while (s.pos < s.buf.length) {
      const op = s.byte();
      inst.byte(op);
      const e = TABLE[op];
      for (let k = 0; k < 2; k++) {
        const type = e[k * 3];
        if (type === NOOP) continue;
        let size = e[k * 3 + 1];
        if (size === 0) {
          size = s.varint();
          inst.varint(size);
        }
        if (type === ADD) data.bytes(s.bytes(size));
        else if (type === RUN) data.byte(s.byte());
        else if (e[k * 3 + 2] >= 2 + S_NEAR) addr.byte(s.byte());
        else addr.varint(s.varint());
      }
    }
  } else {
    data.bytes(r.bytes(dataLen));
    inst.bytes(r.bytes(instLen));
    addr.bytes(r.bytes(addrLen));
  }
  if (r.pos !== end) throw new VcdiffFormatError('VCDIFF: window length does not match its sections');
  const body = new Writer();
  body.varint(targetLength);
  body.byte(0);
  body.varint(data.length);
  body.varint(inst.length);
  body.varint(addr.length);
  body.bytes(data.out());
  body.bytes(inst.out());
  body.bytes(addr.out());
  const b = body.out();
  out.varint(b.length);
  out.bytes(b);
}
