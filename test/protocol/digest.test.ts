import t from 'tap';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { hexBytesMatch, hexMatches, hmacKey, hmacSha256Into, md5Into, sha256Into, wordsToHex } from '../../src/protocol/digest';

// The JavaScript digests against OpenSSL (node:crypto) on random inputs of every length
// from 0 to 300 bytes (each padding case: 55/56/63/64 bytes into a block, two-block
// tails) and a few long ones, with random keys of every length up to 64 bytes.

const lengths = [...Array.from({ length: 301 }, (_, i) => i), 1000, 4095, 4096, 65537];

t.test('SHA-256, MD5 and HMAC-SHA256 equal node:crypto', async (t) => {
  const sha = new Int32Array(8);
  const md = new Int32Array(4);
  let failures = 0;
  for (const len of lengths) {
    const data = randomBytes(len);
    sha256Into(data, len, sha);
    if (wordsToHex(sha, true) !== createHash('sha256').update(data).digest('hex')) { failures++; t.fail(`sha256 of ${len} bytes`); }
    md5Into(data, len, md);
    if (wordsToHex(md, false) !== createHash('md5').update(data).digest('hex')) { failures++; t.fail(`md5 of ${len} bytes`); }
    const key = randomBytes(len % 65);
    hmacSha256Into(hmacKey(key), data, len, sha);
    if (wordsToHex(sha, true) !== createHmac('sha256', key).update(data).digest('hex')) { failures++; t.fail(`hmac of ${len} bytes, ${key.length}-byte key`); }
  }
  t.equal(failures, 0, `${lengths.length} lengths × 3 digests`);
});

t.test('only the first `len` bytes are hashed', async (t) => {
  const data = randomBytes(200);
  const sha = new Int32Array(8);
  sha256Into(data, 70, sha);
  t.equal(wordsToHex(sha, true), createHash('sha256').update(data.subarray(0, 70)).digest('hex'));
});

t.test('hmacKey refuses a key longer than a block', async (t) => {
  t.throws(() => hmacKey(new Uint8Array(65)), RangeError);
});

t.test('hexMatches: every byte and nibble position, both byte orders', async (t) => {
  const words = new Int32Array(randomBytes(32).buffer.slice(0));
  for (const bigEndian of [true, false]) {
    const hex = wordsToHex(words, bigEndian);
    t.ok(hexMatches(hex, words, bigEndian), 'itself');
    t.ok(hexMatches(hex.toUpperCase(), words, bigEndian), 'uppercase');
    t.notOk(hexMatches(hex, words, !bigEndian), 'the other byte order');
    let missed = 0;
    for (let i = 0; i < hex.length; i++) {
      const flipped = hex.slice(0, i) + ((parseInt(hex[i], 16) ^ 1).toString(16)) + hex.slice(i + 1);
      const notHex = hex.slice(0, i) + 'g' + hex.slice(i + 1);
      const wide = hex.slice(0, i) + String.fromCharCode(0x130 + parseInt(hex[i], 16)) + hex.slice(i + 1);
      if (hexMatches(flipped, words, bigEndian) || hexMatches(notHex, words, bigEndian) || hexMatches(wide, words, bigEndian)) missed++;
    }
    t.equal(missed, 0, 'a changed, non-hex or non-ASCII character anywhere is refused');
    t.notOk(hexMatches(hex.slice(1), words, bigEndian), 'short');
    t.notOk(hexMatches(hex + '0', words, bigEndian), 'long');
  }
});

t.test('hexBytesMatch: hex given as bytes at an offset, every position, both byte orders', async (t) => {
  const words = new Int32Array(randomBytes(32).buffer.slice(0));
  for (const bigEndian of [true, false]) {
    const hex = wordsToHex(words, bigEndian);
    const at = (s: string) => Buffer.from('xx&' + s + '&yy', 'latin1'); // the hex at offset 3
    t.ok(hexBytesMatch(at(hex), 3, hex.length, words, bigEndian), 'itself');
    t.ok(hexBytesMatch(at(hex.toUpperCase()), 3, hex.length, words, bigEndian), 'uppercase');
    t.notOk(hexBytesMatch(at(hex), 3, hex.length, words, !bigEndian), 'the other byte order');
    t.notOk(hexBytesMatch(at(hex), 2, hex.length, words, bigEndian), 'one byte early');
    t.notOk(hexBytesMatch(at(hex), 3, hex.length - 1, words, bigEndian), 'one byte short');
    t.notOk(hexBytesMatch(at(hex), 3 + 8, hex.length, words, bigEndian), 'running past the end');
    let missed = 0;
    for (let i = 0; i < hex.length; i++) {
      const flipped = at(hex);
      flipped[3 + i] = (parseInt(hex[i], 16) ^ 1).toString(16).charCodeAt(0);
      const notHex = at(hex);
      notHex[3 + i] = 0x67; // 'g'
      const high = at(hex);
      high[3 + i] = hex.charCodeAt(i) | 0x80; // past ASCII, same low seven bits
      for (const b of [flipped, notHex, high]) if (hexBytesMatch(b, 3, hex.length, words, bigEndian)) missed++;
    }
    t.equal(missed, 0, 'a changed, non-hex or non-ASCII byte anywhere is refused');
  }
});

t.test('HMAC with one key over messages that share their first block, or not, in any order', async (t) => {
  const keyBytes = randomBytes(20);
  const key = hmacKey(keyBytes);
  const out = new Int32Array(8);
  const base = randomBytes(300);
  let seed = 99;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  let failures = 0;
  for (let i = 0; i < 500; i++) {
    const msg = Buffer.from(base);
    const kind = rnd(4);
    if (kind === 1) msg[rnd(64)] ^= 1 + rnd(255); // a different first block
    if (kind === 2) msg[64 + rnd(200)] ^= 1 + rnd(255); // same first block, another tail
    const len = kind === 3 ? rnd(64) : 64 + rnd(236); // shorter than a block, or not
    hmacSha256Into(key, msg, len, out);
    if (wordsToHex(out, true) !== createHmac('sha256', keyBytes).update(msg.subarray(0, len)).digest('hex')) failures++;
  }
  t.equal(failures, 0, '500 messages');
});
