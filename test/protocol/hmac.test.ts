import t from 'tap';
import Pusher from 'pusher';
import { createHash, createHmac } from 'node:crypto';
import {
  channelAuth, hmacSha256BytesMatch, hmacSha256Hex, hmacSha256Matches, md5BytesMatch, md5Hex, md5Matches, safeEqual, userAuth, verifyChannelAuth, verifyUserAuth, webhookSignature,
} from '../../src/protocol/hmac';

// Pusher's published test credentials (docs "auth signatures", and every official SDK's tests).
const KEY = '278d425bdf160c739803';
const SECRET = '7ad3773142a6692b25b8';
const SOCKET = '1234.1234';
const sdk = new Pusher({ appId: '3', key: KEY, secret: SECRET, host: '127.0.0.1' });

t.test('published private channel vector', async (t) => {
  const expected = `${KEY}:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4`;
  t.equal(channelAuth(KEY, SECRET, SOCKET, 'private-foobar'), expected);
  t.equal(sdk.authorizeChannel(SOCKET, 'private-foobar').auth, expected, 'pusher SDK agrees');
  t.ok(verifyChannelAuth(expected, KEY, SECRET, SOCKET, 'private-foobar'));
});

t.test('published presence channel vector', async (t) => {
  // The published vector is for "Mr. Pusher" (pusher-http-java/go/haskell tests, docs);
  // the same data with "Mr. Channels" gives 31935e7d…, checked against the SDK below.
  const data = '{"user_id":10,"user_info":{"name":"Mr. Pusher"}}';
  const expected = `${KEY}:afaed3695da2ffd16931f457e338e6c9f2921fa133ce7dac49f529792be6304c`;
  t.equal(channelAuth(KEY, SECRET, SOCKET, 'presence-foobar', data), expected);
  t.ok(verifyChannelAuth(expected, KEY, SECRET, SOCKET, 'presence-foobar', data));

  const member = { user_id: 10, user_info: { name: 'Mr. Channels' } };
  // user_id typed string in the SDK's .d.ts; numbers are allowed on the wire
  const r = sdk.authorizeChannel(SOCKET, 'presence-foobar', member as unknown as Pusher.PresenceChannelData);
  t.equal(r.channel_data, '{"user_id":10,"user_info":{"name":"Mr. Channels"}}');
  t.equal(r.auth, `${KEY}:31935e7d86dba64c2a90aed31fdc61869f9b22ba9d8863bba239c03ca481bc80`);
  t.equal(channelAuth(KEY, SECRET, SOCKET, 'presence-foobar', r.channel_data), r.auth);
});

t.test('verifyChannelAuth refuses near misses', async (t) => {
  const good = channelAuth(KEY, SECRET, SOCKET, 'private-a');
  t.notOk(verifyChannelAuth(undefined, KEY, SECRET, SOCKET, 'private-a'));
  t.notOk(verifyChannelAuth(42, KEY, SECRET, SOCKET, 'private-a'));
  t.notOk(verifyChannelAuth('', KEY, SECRET, SOCKET, 'private-a'));
  t.notOk(verifyChannelAuth(good.split(':')[1], KEY, SECRET, SOCKET, 'private-a'), 'signature without key');
  t.notOk(verifyChannelAuth('otherkey:' + good.split(':')[1], KEY, SECRET, SOCKET, 'private-a'), 'wrong key');
  t.notOk(verifyChannelAuth(good.toUpperCase(), KEY, SECRET, SOCKET, 'private-a'));
  t.notOk(verifyChannelAuth(good, KEY, SECRET, '1234.1235', 'private-a'), 'other socket');
  t.notOk(verifyChannelAuth(good, KEY, SECRET, SOCKET, 'private-b'), 'other channel');
  t.notOk(verifyChannelAuth(good, KEY, 'other-secret', SOCKET, 'private-a'), 'other secret');
  t.notOk(verifyChannelAuth(good, KEY, SECRET, SOCKET, 'private-a', '{}'), 'channel_data not signed');
  t.notOk(verifyChannelAuth(good + '0', KEY, SECRET, SOCKET, 'private-a'));
});

t.test('user authentication (pusher:signin) matches the SDK', async (t) => {
  const userData = { id: 'u1', user_info: { name: 'Zoë' }, watchlist: ['u2'] };
  const r = sdk.authenticateUser(SOCKET, userData);
  t.equal(userAuth(KEY, SECRET, SOCKET, r.user_data), r.auth);
  t.ok(verifyUserAuth(r.auth, KEY, SECRET, SOCKET, r.user_data));
  t.notOk(verifyUserAuth(r.auth, KEY, SECRET, '1.2', r.user_data));
  t.notOk(verifyUserAuth(r.auth, KEY, SECRET, SOCKET, r.user_data + ' '));
  t.notOk(verifyUserAuth(null, KEY, SECRET, SOCKET, r.user_data));
  t.equal(r.auth, `${KEY}:${hmacSha256Hex(SECRET, `${SOCKET}::user::${r.user_data}`)}`);
});

t.test('webhook signature matches the SDK verifier', async (t) => {
  const body = '{"time_ms":1,"events":[{"name":"channel_occupied","channel":"a"}]}';
  const wh = sdk.webhook({
    headers: { 'content-type': 'application/json', 'x-pusher-key': KEY, 'x-pusher-signature': webhookSignature(SECRET, body) },
    rawBody: body,
  });
  t.ok(wh.isValid());
});

t.test('hmac, md5 and safeEqual', async (t) => {
  // RFC 4231 test case 2
  t.equal(hmacSha256Hex('Jefe', 'what do ya want for nothing?'), '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
  t.equal(md5Hex(''), 'd41d8cd98f00b204e9800998ecf8427e');
  t.equal(md5Hex('é'), md5Hex(Buffer.from('é', 'utf8')), 'strings hashed as UTF-8');
  t.ok(safeEqual('abc', 'abc'));
  t.ok(safeEqual('', ''));
  t.notOk(safeEqual('abc', 'abd'));
  t.notOk(safeEqual('abc', 'abcd'));
  t.notOk(safeEqual('é', 'e'), 'different byte lengths');
});

t.test('known answers: RFC 4231 (HMAC-SHA256) and RFC 1321 (MD5)', async (t) => {
  // RFC 4231 §4.2, §4.3, §4.5: the cases whose key and data are text (secrets are
  // strings); cases with binary keys are covered by the comparison with createHmac below.
  t.equal(hmacSha256Hex('\x0b'.repeat(20), 'Hi There'), 'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7', 'RFC 4231 case 1');
  t.equal(hmacSha256Hex('Jefe', 'what do ya want for nothing?'), '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843', 'RFC 4231 case 2');
  const key4 = String.fromCharCode(...Array.from({ length: 25 }, (_, i) => i + 1));
  const data4 = Buffer.alloc(50, 0xcd);
  const mac4 = '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b';
  t.ok(hmacSha256BytesMatch(key4, data4, data4.length, Buffer.from(mac4), 0, mac4.length), 'RFC 4231 case 4 (binary data, through the bytes path)');
  // RFC 1321 appendix A.5, the test suite.
  const suite: [string, string][] = [
    ['', 'd41d8cd98f00b204e9800998ecf8427e'],
    ['a', '0cc175b9c0f1b6a831c399e269772661'],
    ['abc', '900150983cd24fb0d6963f7d28e17f72'],
    ['message digest', 'f96b697d7cb7938d525a2f31aaf161d0'],
    ['abcdefghijklmnopqrstuvwxyz', 'c3fcd3d76192e4007dfb496cca67e13b'],
    ['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', 'd174ab98d277d9f5a5611c2c9f419d9f'],
    ['1234567890'.repeat(8), '57edf4a22be3c955ac49da2e2107b67a'],
  ];
  for (const [m, want] of suite) {
    t.equal(md5Hex(m), want, `MD5("${m.length > 20 ? m.slice(0, 20) + '…' : m}")`);
    t.ok(md5Matches(Buffer.from(m), want), 'md5Matches');
    t.ok(md5BytesMatch(Buffer.from(m), Buffer.from(want), 0, want.length), 'md5BytesMatch');
  }
});

t.test('hmacSha256Hex (cached key pads) equals node:crypto createHmac for every key length', async (t) => {
  const keys = ['', 'k', 'a'.repeat(63), 'b'.repeat(64), 'c'.repeat(65), 'd'.repeat(200), 'sécret-ключ-🔑', 'app-secret'];
  const messages = ['', 'POST\n/apps/1/events\nauth_key=k', 'x'.repeat(1000), 'ünïcode ✓'];
  for (const key of keys) {
    for (const msg of messages) {
      // twice: the cached pads must not be consumed by the first use
      for (let round = 0; round < 2; round++) {
        t.equal(hmacSha256Hex(key, msg), createHmac('sha256', key).update(msg, 'utf8').digest('hex'),
          `key of ${key.length} chars, message of ${msg.length} chars, round ${round + 1}`);
      }
    }
  }
  t.notOk(safeEqual('abc', 'abcd'), 'different lengths are unequal');
  t.notOk(safeEqual('é', 'e'), 'non-ASCII compares by code unit');
});

/** Wrong spellings of `hex` that must all be refused. */
function misspellings(hex: string): [string, string][] {
  return [
    ['one character short', hex.slice(0, -1)],
    ['one character long', hex + '0'],
    ['not hex at the end', hex.slice(0, -2) + 'zz'],
    ['not hex at the start', 'zz' + hex.slice(2)],
    ['last nibble differs', hex.slice(0, -1) + (hex.endsWith('0') ? '1' : '0')],
    ['first nibble differs', (hex.startsWith('0') ? '1' : '0') + hex.slice(1)],
    ['empty', ''],
    ['spaces', ' '.repeat(hex.length)],
    ['a non-ASCII character', hex.slice(0, -1) + 'é'],
    ['a character whose low byte is a hex digit', hex.slice(0, -1) + String.fromCharCode(0x100 + hex.charCodeAt(hex.length - 1))],
  ];
}

t.test('md5Matches and hmacSha256Matches: every spelling of the digest, inputs short and long', async (t) => {
  for (const size of [0, 1, 55, 56, 64, 140, 511, 512, 513, 4096]) {
    const body = Buffer.alloc(size, 'é').subarray(0, size);
    const md5 = createHash('md5').update(body).digest('hex');
    t.ok(md5Matches(body, md5), `md5 of ${size} bytes`);
    t.ok(md5Matches(body, md5.toUpperCase()), `md5 of ${size} bytes, uppercase`);
    for (const [what, bad] of misspellings(md5)) t.notOk(md5Matches(body, bad), `md5 of ${size} bytes: ${what}`);

    const data = 'POST\n/apps/1/events\n' + 'ü'.repeat(size >> 1);
    const mac = createHmac('sha256', SECRET).update(data).digest('hex');
    t.equal(hmacSha256Hex(SECRET, data), mac, `hmac hex of ${Buffer.byteLength(data)} bytes`);
    t.ok(hmacSha256Matches(SECRET, data, mac), `hmac of ${Buffer.byteLength(data)} bytes`);
    for (const [what, bad] of misspellings(mac)) t.notOk(hmacSha256Matches(SECRET, data, bad), `hmac of ${Buffer.byteLength(data)} bytes: ${what}`);
  }
  const longKey = 'k'.repeat(100); // longer than a block: hashed first (RFC 2104)
  t.equal(hmacSha256Hex(longKey, 'x'), createHmac('sha256', longKey).update('x').digest('hex'), 'a key longer than 64 bytes');
});
