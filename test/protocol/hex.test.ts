import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { hexBytesMatch, hexMatches } from '../../src/protocol/hex';

// hex.ts compares the hex a request carries with a digest given as a 'binary' string
// (one character per byte, as node:crypto gives it to hmac.ts).

/** A random 32-byte digest as hmac.ts holds it, and its lowercase hex. */
function digest(): { bin: string; hex: string } {
  const d = randomBytes(32);
  return { bin: d.toString('latin1'), hex: d.toString('hex') };
}

t.test('hexMatches: the hex of the digest, either case, nothing else, at every position', async (t) => {
  for (let round = 0; round < 20; round++) {
    const { bin, hex } = digest();
    t.ok(hexMatches(hex, bin), 'itself');
    t.ok(hexMatches(hex.toUpperCase(), bin), 'uppercase');
    let missed = 0;
    for (let i = 0; i < hex.length; i++) {
      const flipped = hex.slice(0, i) + ((parseInt(hex[i], 16) ^ 1).toString(16)) + hex.slice(i + 1);
      const notHex = hex.slice(0, i) + 'g' + hex.slice(i + 1);
      const wide = hex.slice(0, i) + String.fromCharCode(0x130 + parseInt(hex[i], 16)) + hex.slice(i + 1);
      const high = hex.slice(0, i) + String.fromCharCode(hex.charCodeAt(i) | 0x80) + hex.slice(i + 1);
      if (hexMatches(flipped, bin) || hexMatches(notHex, bin) || hexMatches(wide, bin) || hexMatches(high, bin)) missed++;
    }
    if (missed !== 0) t.fail(`round ${round}: a changed, non-hex or non-ASCII character was accepted ${missed} times`);
    t.notOk(hexMatches(hex.slice(1), bin), 'short');
    t.notOk(hexMatches(hex + '0', bin), 'long');
    t.notOk(hexMatches('', bin), 'empty');
  }
  const md5 = createHash('md5').update('hello').digest();
  t.ok(hexMatches(md5.toString('hex'), md5.toString('latin1')), 'a 16-byte digest');
  const long = randomBytes(33);
  t.notOk(hexMatches(long.toString('hex'), long.toString('latin1')), 'more than 64 hex digits are refused (digests here are at most 32 bytes)');
});

t.test('hexBytesMatch: hex given as bytes at an offset, every position, bounds', async (t) => {
  const { bin, hex } = digest();
  const at = (s: string) => Buffer.from('xx&' + s + '&yy', 'latin1'); // the hex at offset 3
  t.ok(hexBytesMatch(at(hex), 3, hex.length, bin), 'itself');
  t.ok(hexBytesMatch(at(hex.toUpperCase()), 3, hex.length, bin), 'uppercase');
  t.notOk(hexBytesMatch(at(hex), 2, hex.length, bin), 'one byte early');
  t.notOk(hexBytesMatch(at(hex), 3, hex.length - 1, bin), 'one byte short');
  t.notOk(hexBytesMatch(at(hex), 3, hex.length + 1, bin), 'one byte long');
  t.notOk(hexBytesMatch(at(hex), 3 + 8, hex.length, bin), 'running past the end');
  t.notOk(hexBytesMatch(at(hex), -1, hex.length, bin), 'a negative offset');
  let missed = 0;
  for (let i = 0; i < hex.length; i++) {
    const flipped = at(hex);
    flipped[3 + i] = (parseInt(hex[i], 16) ^ 1).toString(16).charCodeAt(0);
    const notHex = at(hex);
    notHex[3 + i] = 0x67; // 'g'
    const high = at(hex);
    high[3 + i] = hex.charCodeAt(i) | 0x80; // past ASCII, same low seven bits
    for (const b of [flipped, notHex, high]) if (hexBytesMatch(b, 3, hex.length, bin)) missed++;
  }
  t.equal(missed, 0, 'a changed, non-hex or non-ASCII byte anywhere is refused');
});
