// The digest work of one signed SDK publish, in every form considered for
// src/protocol/hmac.ts: MD5 of the body (body_md5) and HMAC-SHA256 of the string to sign
// (auth_signature), each compared with the hex the query carries.
//
//   npx tsc -p . && taskset -c 1 node dist/bench/protocol/digests.bench.js [rounds=7] [ops=100000]
//
// Forms: this build's src/protocol/hmac.ts (the functions the SDK-layout check calls; the
// base of the ratios), node:crypto as createHmac/createHash one-shots, createHmac with a
// KeyObject, crypto.hash one-shots over per-secret ipad/opad blocks (no Hmac object) with
// a Buffer or a 'binary' string output, and @noble/hashes one-shot and with a prepared
// key state copied into reused instances (_cloneInto, digestInto: no allocation). The
// hand-written JavaScript digests this replaced are measured by this file at commit
// 8397328 (form 'hand-written (digest.ts)').
// Requests are the bench publisher's (bench/harness/publisher.ts: 100-byte data, the
// `pusher` SDK's query), 64 of them with different channels and timestamps, in turn.
// Time is the process's CPU time (user + system), which on a shared machine moves less
// than wall time; rounds alternate the order of the forms; medians of the rounds.
import crypto, { createHash, createHmac, createSecretKey } from 'node:crypto';
import { hmac as nobleHmac } from '@noble/hashes/hmac.js';
import { md5 as nobleMd5, type _MD5 } from '@noble/hashes/legacy.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import { signApiQuery } from '../../src/protocol/api-auth';
import { hmacSha256BytesMatch, md5BytesMatch } from '../../src/protocol/hmac';

const KEY = '278d425bdf160c739803';
const SECRET = '7ad3773142a6692b25b8';
const PATH = '/apps/1234/events';

/** What a form is given: the bytes of the body and string to sign, and the hex from the query. */
interface Request { body: Buffer; sts: Buffer; md5Hex: Buffer; sigHex: Buffer }

function requests(n: number): Request[] {
  const out: Request[] = [];
  const now = Math.floor(Date.now() / 1000);
  for (let i = 0; i < n; i++) {
    const body = Buffer.from(JSON.stringify({ name: 'bench', channels: [`own0-${i * 37}`], data: '@0 ' + 'x'.repeat(82) }));
    const q = new URLSearchParams(signApiQuery(KEY, SECRET, 'POST', PATH, {}, body, now - (i % 3)));
    const signed = [...q].filter(([k]) => k !== 'auth_signature').map(([k, v]) => `${k}=${v}`).join('&');
    out.push({
      body, sts: Buffer.from(`POST\n${PATH}\n${signed}`),
      md5Hex: Buffer.from(q.get('body_md5')!, 'latin1'), sigHex: Buffer.from(q.get('auth_signature')!, 'latin1'),
    });
  }
  return out;
}

/** Hex digits by byte (-1: not one), for the library forms' compare (as digest.ts does it). */
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[65 + i] = HEX[97 + i] = 10 + i;
/** Whether the ASCII hex equals `digest`, in constant time (the same for every library form). */
function hexIs(hex: Uint8Array, digest: Uint8Array): boolean {
  if (hex.length !== 2 * digest.length) return false;
  let diff = 0;
  for (let i = 0; i < digest.length; i++) {
    const hi = HEX[hex[2 * i]], lo = HEX[hex[2 * i + 1]];
    diff |= (((hi << 4) | lo) ^ digest[i]) | ((hi | lo) & 0x100);
  }
  return diff === 0;
}

interface Form { md5: (r: Request) => boolean; hmac: (r: Request) => boolean }

const thisBuild: Form = {
  md5: (r) => md5BytesMatch(r.body, r.md5Hex, 0, r.md5Hex.length),
  hmac: (r) => hmacSha256BytesMatch(SECRET, r.sts, r.sts.length, r.sigHex, 0, r.sigHex.length),
};

const nodeOneShot: Form = {
  md5: (r) => hexIs(r.md5Hex, createHash('md5').update(r.body).digest()),
  hmac: (r) => hexIs(r.sigHex, createHmac('sha256', SECRET).update(r.sts).digest()),
};

function nodeKeyObject(): Form {
  const key = createSecretKey(Buffer.from(SECRET));
  return { md5: nodeOneShot.md5, hmac: (r) => hexIs(r.sigHex, createHmac('sha256', key).update(r.sts).digest()) };
}

/** HMAC as two crypto.hash one-shots: H(opad ‖ H(ipad ‖ m)), the pads made once per secret. */
function nodeHashPads(): Form {
  const ipad = Buffer.alloc(64, 0x36), opad = Buffer.alloc(64, 0x5c);
  const k = Buffer.from(SECRET);
  for (let i = 0; i < k.length; i++) { ipad[i] ^= k[i]; opad[i] ^= k[i]; }
  const inner = Buffer.alloc(64 + 1024), outer = Buffer.alloc(64 + 32);
  ipad.copy(inner, 0);
  opad.copy(outer, 0);
  return {
    md5: (r) => hexIs(r.md5Hex, crypto.hash('md5', r.body, 'buffer')),
    hmac: (r) => {
      r.sts.copy(inner, 64);
      crypto.hash('sha256', inner.subarray(0, 64 + r.sts.length), 'buffer').copy(outer, 64);
      return hexIs(r.sigHex, crypto.hash('sha256', outer, 'buffer'));
    },
  };
}

/** hexIs for a digest given as a 'binary' (latin1) string, written out as bytes first (as src/protocol/hex.ts does). */
const digestBytes = Buffer.alloc(32);
function hexIsLatin1(hex: Uint8Array, digest: string): boolean {
  digestBytes.write(digest, 0, digest.length, 'latin1');
  return hexIs(hex, digestBytes.subarray(0, digest.length));
}

/**
 * nodeHashPads with the digests as 'binary' (latin1) strings: crypto.hash's Buffer output costs a
 * native backing store per call (~0.6 µs more than a string output, measured here).
 */
function nodeHashPadsLatin1(): Form {
  const ipad = Buffer.alloc(64, 0x36), opad = Buffer.alloc(64, 0x5c);
  const k = Buffer.from(SECRET);
  for (let i = 0; i < k.length; i++) { ipad[i] ^= k[i]; opad[i] ^= k[i]; }
  const inner = Buffer.alloc(64 + 1024), outer = Buffer.alloc(64 + 32);
  ipad.copy(inner, 0);
  opad.copy(outer, 0);
  return {
    md5: (r) => hexIsLatin1(r.md5Hex, crypto.hash('md5', r.body, 'binary')),
    hmac: (r) => {
      r.sts.copy(inner, 64);
      outer.write(crypto.hash('sha256', inner.subarray(0, 64 + r.sts.length), 'binary'), 64, 'latin1');
      return hexIsLatin1(r.sigHex, crypto.hash('sha256', outer, 'binary'));
    },
  };
}

function nobleOneShot(): Form {
  const key = Buffer.from(SECRET);
  return {
    md5: (r) => hexIs(r.md5Hex, nobleMd5(r.body)),
    hmac: (r) => hexIs(r.sigHex, nobleHmac(nobleSha256, key, r.sts)),
  };
}

/** The key's state after its pad blocks made once; each message starts from a copy in a reused instance. */
function noblePrepared(): Form {
  const keyed = nobleHmac.create(nobleSha256, Buffer.from(SECRET));
  const h = keyed.clone();
  // md5.create()'s declared type is a generic hash; its class is _MD5.
  const fresh = nobleMd5.create() as _MD5;
  const m = nobleMd5.create() as _MD5;
  const sig = new Uint8Array(32), md = new Uint8Array(16);
  return {
    md5: (r) => { fresh._cloneInto(m).update(r.body).digestInto(md); return hexIs(r.md5Hex, md); },
    hmac: (r) => { keyed._cloneInto(h).update(r.sts).digestInto(sig); return hexIs(r.sigHex, sig); },
  };
}

const forms: Record<string, Form> = {
  'src/protocol/hmac.ts': thisBuild,
  'node createHmac/createHash': nodeOneShot,
  'node createHmac(KeyObject)': nodeKeyObject(),
  'node crypto.hash, pads': nodeHashPads(),
  'node crypto.hash, pads, binary': nodeHashPadsLatin1(),
  'noble one-shot': nobleOneShot(),
  'noble prepared, _cloneInto': noblePrepared(),
};

const rounds = Number(process.argv[2] ?? 7);
const ops = Number(process.argv[3] ?? 100_000);
const reqs = requests(64);
type Part = 'md5' | 'hmac' | 'both';
const run = (f: Form, part: Part, n: number): number => {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const r = reqs[i & 63];
    if (part === 'both') ok += f.md5(r) && f.hmac(r) ? 1 : 0;
    else ok += f[part](r) ? 1 : 0;
  }
  return ok;
};
/** ns of CPU per op */
function measure(f: Form, part: Part): number {
  const c0 = process.cpuUsage();
  const ok = run(f, part, ops);
  const c = process.cpuUsage(c0);
  if (ok !== ops) throw new Error(`a form refused a valid request (${ok} of ${ops})`);
  return ((c.user + c.system) * 1000) / ops;
}

const names = Object.keys(forms);
const parts: Part[] = ['both', 'hmac', 'md5'];
const samples = new Map<string, number[]>();
for (const n of names) for (const p of parts) { samples.set(`${n}|${p}`, []); run(forms[n], p, ops / 10); } // warm-up
for (let round = 0; round < rounds; round++) {
  for (const n of round % 2 === 0 ? names : [...names].reverse()) for (const p of parts) samples.get(`${n}|${p}`)!.push(measure(forms[n], p));
}
const median = (a: number[]) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const base = median(samples.get(`${names[0]}|both`)!);
console.log(`${rounds} rounds × ${ops} requests (body ${reqs[0].body.length} B, string to sign ${reqs[0].sts.length} B); CPU ns per request, median (min–max)`);
console.log(`${'form'.padEnd(30)} ${'md5 + hmac'.padEnd(22)} ${'× first'.padEnd(7)} ${'hmac'.padEnd(8)} md5`);
for (const n of names) {
  const b = samples.get(`${n}|both`)!;
  const cell = `${median(b).toFixed(0)} (${Math.min(...b).toFixed(0)}–${Math.max(...b).toFixed(0)})`;
  console.log(`${n.padEnd(30)} ${cell.padEnd(22)} ${(median(b) / base).toFixed(2).padEnd(7)} ${median(samples.get(`${n}|hmac`)!).toFixed(0).padEnd(8)} ${median(samples.get(`${n}|md5`)!).toFixed(0)}`);
}
