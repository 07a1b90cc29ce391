// POST /apps/{id}/events and /apps/{id}/batch_events, against the protocol "HTTP API"
// and the spec's Event resource, Errors and Limits.

import http from 'node:http';
import t from 'tap';
import { signApiQuery } from '../../src/protocol/api-auth';
import { isJsonError, now, readResponse, signedPost as signedPostTo, type AppCreds, type RawResponse } from '../helpers/http';
import { APP, RawClient, WORKERS, eventually, spreadClients, startServer, type Frame, type TestServer } from '../helpers/server';

/** An app with small limits, for the validation tests. */
const LIM = {
  id: 'lim-id', key: 'lim-key', secret: 'lim-secret',
  max_event_channels_at_once: 2, max_event_payload_in_kb: 1, max_event_batch_size: 3,
} as const;
/** An app whose payload limit is above the 1 MB body limit (so the body limit is what bites). */
const BIG = { id: 'big-id', key: 'big-key', secret: 'big-secret', max_event_payload_in_kb: 4096 } as const;

/** A correctly signed POST of `body` (a JSON value or a raw string) to /apps/{id}/{what}, 5 s timeout. */
function signedPost(srv: TestServer, what: 'events' | 'batch_events', body: unknown, app: AppCreds = APP): Promise<RawResponse> {
  return signedPostTo(srv.port, app, what, body, {}, 5000);
}

/** Asserts a JSON error body {"error": "<message>"} with that status, the message matching `re`, and no stack trace. */
function isError(t: tap.Test, r: RawResponse, status: number, re: RegExp, what: string): void {
  isJsonError(t, r, status, re, what);
  t.notMatch(r.text, /\n\s+at /, `${what}: no stack trace`);
}

async function subscribeAll(t: tap.Test, cs: RawClient[], channel: string, channelData?: (i: number) => unknown): Promise<void> {
  await Promise.all(cs.map(async (c, i) => {
    const f = channelData ? await c.subscribeAuthed(channel, channelData(i)) : await c.subscribe(channel);
    if (f.event !== 'pusher_internal:subscription_succeeded') t.fail(`subscribe ${channel}: ${JSON.stringify(f)}`);
  }));
}

/** Waits until the owner shard counts `n` subscriptions (public channel subscriptions are reported async). */
async function waitCount(srv: TestServer, channel: string, n: number): Promise<void> {
  await eventually(async () => {
    const res = await srv.sdk().get({ path: `/channels/${channel}`, params: { info: 'subscription_count' } });
    return ((await res.json()) as { subscription_count: number }).subscription_count === n;
  }, 3000, `${channel} to have ${n} subscriptions`);
}

const ofEvent = (name: string, channel?: string) => (f: Frame) => f.event === name && (channel === undefined || f.channel === channel);

t.test('POST /events', async (t) => {
  const srv = await startServer({ apps: [{ ...APP }, { ...LIM }, { ...BIG }], http: { request_limit_in_mb: 1 } });
  t.teardown(() => srv.stop());

  t.test('answers {"ok":true} and delivers {"event","channel","data"} with data as a string', async (t) => {
    const [c] = await spreadClients(srv, 1);
    await subscribeAll(t, [c], 'news');

    const r = await signedPost(srv, 'events', { name: 'plain', channel: 'news', data: 'hello' });
    t.equal(r.status, 200);
    t.match(r.headers['content-type'], /application\/json/);
    t.same(r.json, { ok: true });
    const f1 = await c.next(ofEvent('plain', 'news'));
    t.same(Object.keys(f1).sort(), ['channel', 'data', 'event'], 'exactly event, channel, data');
    t.equal(f1.data, 'hello', 'string data is passed through as is');

    const r2 = await signedPost(srv, 'events', { name: 'obj', channel: 'news', data: { a: 1, b: [true, null] } });
    t.same(r2.json, { ok: true });
    const f2 = await c.next(ofEvent('obj', 'news'));
    t.type(f2.data, 'string', 'object data arrives as a JSON string');
    t.same(JSON.parse(f2.data), { a: 1, b: [true, null] });

    const r3 = await signedPost(srv, 'events', { name: 'json-string', channel: 'news', data: '{"x":1}' });
    t.same(r3.json, { ok: true });
    t.equal((await c.next(ofEvent('json-string', 'news'))).data, '{"x":1}', 'a JSON string stays the same string');

    const res = await srv.sdk().trigger('news', 'via-sdk', { text: 'hi' });
    t.equal(res.status, 200);
    t.same(await res.json(), { ok: true });
    const f4 = await c.next(ofEvent('via-sdk', 'news'));
    t.equal(f4.data, JSON.stringify({ text: 'hi' }));
  });

  t.test('multiple channels: each subscriber gets the event on its channel', async (t) => {
    const [a, b, both] = await spreadClients(srv, 3);
    await subscribeAll(t, [a], 'multi-a');
    await subscribeAll(t, [b], 'multi-b');
    await subscribeAll(t, [both], 'multi-a');
    await subscribeAll(t, [both], 'multi-b');

    const r = await signedPost(srv, 'events', { name: 'm', channels: ['multi-a', 'multi-b'], data: 'x' });
    t.same(r.json, { ok: true });
    t.same(await a.next(ofEvent('m')), { event: 'm', channel: 'multi-a', data: 'x' });
    t.same(await b.next(ofEvent('m')), { event: 'm', channel: 'multi-b', data: 'x' });
    const got = [await both.next(ofEvent('m')), await both.next(ofEvent('m'))].map((f) => f.channel).sort();
    t.same(got, ['multi-a', 'multi-b'], 'a socket on both channels gets it once per channel');

    const res = await srv.sdk().trigger(['multi-a', 'multi-b'], 'sdk-m', 'y');
    t.equal(res.status, 200);
    t.equal((await a.next(ofEvent('sdk-m'))).channel, 'multi-a');
    t.equal((await b.next(ofEvent('sdk-m'))).channel, 'multi-b');
  });

  t.test('socket_id excludes exactly that connection, on every shard', async (t) => {
    const cs = await spreadClients(srv, 6);
    await subscribeAll(t, cs, 'excl');
    // Exclude one connection per shard in turn.
    const byShard = new Map<string, RawClient>();
    for (const c of cs) byShard.set(c.socketId.split('.')[0], c);
    t.ok(byShard.size >= Math.min(WORKERS, 2), `connections on ${byShard.size} shard(s)`);
    let n = 0;
    for (const excluded of byShard.values()) {
      n++;
      const r = await signedPost(srv, 'events', { name: `skip-${n}`, channel: 'excl', data: String(n), socket_id: excluded.socketId });
      t.same(r.json, { ok: true });
      // A second event without socket_id: once it has arrived, the first would have too (FIFO).
      const r2 = await signedPost(srv, 'events', { name: `all-${n}`, channel: 'excl', data: String(n) });
      t.same(r2.json, { ok: true });
      for (const c of cs) {
        await c.next(ofEvent(`all-${n}`, 'excl'));
        const skipped = c.frames.filter(ofEvent(`skip-${n}`));
        if (c === excluded) t.equal(skipped.length, 0, `excluded ${c.socketId} did not get skip-${n}`);
        else t.equal((await c.next(ofEvent(`skip-${n}`, 'excl'), 100)).data, String(n), `${c.socketId} got skip-${n}`);
      }
    }
    // Through the SDK too.
    const excluded = cs[cs.length - 1];
    await srv.sdk().trigger('excl', 'sdk-skip', 'z', { socket_id: excluded.socketId });
    await srv.sdk().trigger('excl', 'sdk-all', 'z');
    for (const c of cs) {
      await c.next(ofEvent('sdk-all'));
      t.equal(c.frames.filter(ofEvent('sdk-skip')).length, c === excluded ? 0 : 1, `${c.socketId} sdk-skip count`);
    }
    // An unknown (but well-formed) socket id excludes nobody.
    await signedPost(srv, 'events', { name: 'nobody', channel: 'excl', data: '', socket_id: '1.1' });
    for (const c of cs) await c.next(ofEvent('nobody', 'excl'));
    t.pass('unknown socket_id excludes no one');
  });

  t.test('info=subscription_count,user_count reports each channel', async (t) => {
    const pub = await spreadClients(srv, 3);
    await subscribeAll(t, pub, 'info-pub');
    const pres = await spreadClients(srv, 3);
    // three (or more) connections, two users: u2 on the third, u1 on all others
    await subscribeAll(t, pres, 'presence-info', (i) => ({ user_id: i === 2 ? 'u2' : 'u1', user_info: {} }));
    await subscribeAll(t, pres, 'presence-info2', () => ({ user_id: 'u3', user_info: {} }));
    await waitCount(srv, 'info-pub', pub.length);

    const r = await signedPost(srv, 'events', {
      name: 'i', channels: ['info-pub', 'presence-info'], data: 'd', info: 'subscription_count',
    });
    t.equal(r.status, 200, r.text);
    t.same(r.json, {
      channels: {
        'info-pub': { subscription_count: pub.length },
        'presence-info': { subscription_count: pres.length },
      },
    }, 'subscription_count of each channel');

    const both = await signedPost(srv, 'events', {
      name: 'i', channels: ['presence-info', 'presence-info2'], data: 'd', info: 'subscription_count,user_count',
    });
    t.equal(both.status, 200, both.text);
    t.same(both.json, {
      channels: {
        'presence-info': { subscription_count: pres.length, user_count: 2 },
        'presence-info2': { subscription_count: pres.length, user_count: 1 },
      },
    }, 'user_count of each presence channel');

    const r2 = await signedPost(srv, 'events', { name: 'i', channel: 'presence-info', data: 'd', info: 'user_count' });
    t.same(r2.json, { channels: { 'presence-info': { user_count: 2 } } }, 'only what was asked for');

    const r3 = await signedPost(srv, 'events', { name: 'i', channel: 'info-empty', data: 'd', info: 'subscription_count' });
    t.same(r3.json, { channels: { 'info-empty': { subscription_count: 0 } } }, 'an empty channel counts 0');

    const res = await srv.sdk().trigger('presence-info', 'i', 'd', { info: 'subscription_count,user_count' });
    t.same(await res.json(), { channels: { 'presence-info': { subscription_count: pres.length, user_count: 2 } } }, 'via SDK');

    const bad = await signedPost(srv, 'events', { name: 'i', channel: 'info-pub', data: 'd', info: 'occupied' });
    isError(t, bad, 400, /info/, 'unknown info attribute');
  });

  t.test('info=user_count is refused (400) unless every channel is a presence channel', async (t) => {
    const pub = await spreadClients(srv, 2);
    await subscribeAll(t, pub, 'uc-pub');
    const msg = /user_count.*presence channels.*"uc-pub" is not one/;
    isError(t, await signedPost(srv, 'events', { name: 'refused', channel: 'uc-pub', data: 'd', info: 'user_count' }), 400, msg, 'a public channel');
    isError(t, await signedPost(srv, 'events', { name: 'refused', channels: ['presence-uc', 'uc-pub'], data: 'd', info: 'subscription_count,user_count' }), 400, msg,
      'a presence and a public channel');
    isError(t, await signedPost(srv, 'events', { name: 'refused', channel: 'private-uc', data: 'd', info: 'user_count' }), 400, /"private-uc" is not one/, 'a private channel');
    const sdkErr = await srv.sdk().trigger('uc-pub', 'refused', 'd', { info: 'user_count' }).then(() => null, (e: { status?: number; body?: string }) => e);
    t.equal(sdkErr?.status, 400, 'the SDK sees 400');
    t.match(sdkErr?.body, /user_count.*presence channels.*uc-pub.*is not one/, 'with the message (in the JSON body)');

    isError(t, await signedPost(srv, 'batch_events', { batch: [
      { name: 'refused', channel: 'presence-uc', data: 'd', info: 'user_count' },
      { name: 'refused', channel: 'uc-pub', data: 'd', info: 'user_count' },
    ] }), 400, /^batch\[1\]: info=user_count.*"uc-pub" is not one/, 'a batch item on a public channel (the whole batch)');
    isError(t, await signedPost(srv, 'batch_events', { batch: [
      { name: 'refused', channels: ['presence-uc', 'uc-pub'], data: 'd', info: 'user_count' },
    ] }), 400, /^batch\[0\]: .*"uc-pub" is not one/, 'a batch item whose second channel is public');
    const sdkBatch = await srv.sdk().triggerBatch([{ channel: 'uc-pub', name: 'refused', data: 'd', info: 'user_count' }])
      .then(() => null, (e: { status?: number; body?: string }) => e);
    t.equal(sdkBatch?.status, 400, 'the SDK sees 400 for the batch');
    t.match(sdkBatch?.body, /batch\[0\]: .*user_count/, 'with the item named');

    // Nothing refused was delivered: the next event each subscriber gets is the marker.
    t.same((await signedPost(srv, 'events', { name: 'marker', channel: 'uc-pub', data: 'm' })).json, { ok: true });
    for (const c of pub) {
      const f = await c.next((f) => f.channel === 'uc-pub' && f.event !== 'pusher_internal:subscription_succeeded');
      t.equal(f.event, 'marker', 'the marker is the first event on uc-pub');
    }
  });

  t.test('batch_events: delivered, answered 1:1 with info per item', async (t) => {
    const pub = await spreadClients(srv, 2);
    await subscribeAll(t, pub, 'batch-pub');
    const [p] = await spreadClients(srv, 1);
    await subscribeAll(t, [p], 'presence-batch', () => ({ user_id: 'b1' }));
    await waitCount(srv, 'batch-pub', pub.length);

    const r = await signedPost(srv, 'batch_events', {
      batch: [
        { name: 'b1', channel: 'batch-pub', data: 'one' },
        { name: 'b2', channel: 'batch-pub', data: { two: 2 }, info: 'subscription_count' },
        { name: 'b3', channel: 'presence-batch', data: 'three', info: 'subscription_count,user_count' },
        { name: 'b4', channels: ['batch-pub', 'presence-batch'], data: 'four', info: 'subscription_count' },
      ],
    });
    t.equal(r.status, 200, r.text);
    t.same(r.json, {
      batch: [
        {},
        { subscription_count: pub.length },
        { subscription_count: 1, user_count: 1 },
        { subscription_count: pub.length }, // info of the first channel
      ],
    });
    for (const c of pub) {
      t.same(await c.next(ofEvent('b1')), { event: 'b1', channel: 'batch-pub', data: 'one' });
      t.same(await c.next(ofEvent('b2')), { event: 'b2', channel: 'batch-pub', data: '{"two":2}' });
      t.equal((await c.next(ofEvent('b4'))).channel, 'batch-pub');
    }
    t.same(await p.next(ofEvent('b3')), { event: 'b3', channel: 'presence-batch', data: 'three' });
    t.equal((await p.next(ofEvent('b4'))).channel, 'presence-batch');

    const res = await srv.sdk().triggerBatch([
      { channel: 'batch-pub', name: 'sb1', data: { k: 'v' } },
      { channel: 'batch-pub', name: 'sb2', data: 'x', info: 'subscription_count' },
    ]);
    t.equal(res.status, 200);
    t.same(await res.json(), { batch: [{}, { subscription_count: pub.length }] }, 'via SDK');
    for (const c of pub) {
      t.equal((await c.next(ofEvent('sb1'))).data, '{"k":"v"}');
      await c.next(ofEvent('sb2'));
    }

    const empty = await signedPost(srv, 'batch_events', { batch: [] });
    t.same({ status: empty.status, body: empty.json }, { status: 200, body: { batch: [] } }, 'an empty batch');
  });

  t.test('validation errors: status and a JSON {"error"} with a useful message', async (t) => {
    const ev = (over: Record<string, unknown>) => ({ name: 'e', channel: 'v', data: 'd', ...over });
    const without = (k: string) => { const e: Record<string, unknown> = ev({}); delete e[k]; return e; };

    isError(t, await signedPost(srv, 'events', without('name')), 400, /name/, 'missing name');
    isError(t, await signedPost(srv, 'events', without('data')), 400, /data/, 'missing data');
    isError(t, await signedPost(srv, 'events', without('channel')), 400, /channel/, 'missing channel');
    isError(t, await signedPost(srv, 'events', ev({ name: '' })), 400, /name/, 'empty name');
    isError(t, await signedPost(srv, 'events', ev({ name: 42 })), 400, /name/, 'name not a string');
    isError(t, await signedPost(srv, 'events', ev({ channel: 'has space' })), 400, /channel/, 'invalid channel name (space)');
    isError(t, await signedPost(srv, 'events', ev({ channel: 'a:b' })), 400, /channel/, 'invalid channel name (colon)');
    isError(t, await signedPost(srv, 'events', ev({ channel: '' })), 400, /channel/, 'empty channel name');
    isError(t, await signedPost(srv, 'events', ev({ channel: 'c'.repeat(201) })), 400, /channel/, 'channel name over 200');
    isError(t, await signedPost(srv, 'events', ev({ channel: undefined, channels: ['ok', 'b@d!'] })), 400, /channel/, 'one invalid name in channels');
    isError(t, await signedPost(srv, 'events', ev({ channel: undefined, channels: [] })), 400, /channels/, 'empty channels');
    isError(t, await signedPost(srv, 'events', ev({ name: 'client-typing' })), 400, /client-/, 'client- event name');
    isError(t, await signedPost(srv, 'events', ev({ name: 'n'.repeat(201) })), 400, /200|long/, 'event name 201 chars');
    t.same((await signedPost(srv, 'events', ev({ name: 'n'.repeat(200) }))).json, { ok: true }, 'event name of 200 chars is fine');
    isError(t, await signedPost(srv, 'events', ev({ socket_id: 'not-a-socket' })), 400, /socket_id/, 'malformed socket_id');

    // Per-app limits (LIM: 2 channels at once, 1 KB payload, 3 per batch).
    isError(t, await signedPost(srv, 'events', ev({ channel: undefined, channels: ['a', 'b', 'c'] }), LIM), 400, /channels?.*2|2.*channels?/, 'three channels, app allows 2');
    t.same((await signedPost(srv, 'events', ev({ channel: undefined, channels: ['a', 'b'] }), LIM)).json, { ok: true }, 'two channels is fine');
    isError(t, await signedPost(srv, 'events', ev({ data: 'x'.repeat(1025) }), LIM), 413, /data|payload|KB/i, 'data of 1025 bytes, app allows 1 KB');
    t.same((await signedPost(srv, 'events', ev({ data: 'x'.repeat(1024) }), LIM)).json, { ok: true }, 'data of exactly 1 KB is fine');
    isError(t, await signedPost(srv, 'events', ev({ data: { s: 'x'.repeat(1100) } }), LIM), 413, /data|payload|KB/i, 'object data over 1 KB once serialised');

    const item = (i: number) => ({ name: `bi${i}`, channel: 'v', data: 'd' });
    isError(t, await signedPost(srv, 'batch_events', { batch: [item(1), item(2), item(3), item(4)] }, LIM), 400, /batch/, 'batch of 4, app allows 3');
    t.equal((await signedPost(srv, 'batch_events', { batch: [item(1), item(2), item(3)] }, LIM)).status, 200, 'batch of 3 is fine');
    isError(t, await signedPost(srv, 'batch_events', { batch: Array.from({ length: 11 }, (_, i) => item(i)) }), 400, /batch/, 'batch of 11, default 10');
    isError(t, await signedPost(srv, 'batch_events', { batch: [item(1), { name: 'client-x', channel: 'v', data: 'd' }] }), 400, /client-/, 'client- name inside a batch');
    isError(t, await signedPost(srv, 'batch_events', { batch: [item(1), { name: 'x', data: 'd' }] }), 400, /channel/, 'batch item without channel');
    isError(t, await signedPost(srv, 'batch_events', { events: [item(1)] }), 400, /batch/, 'no batch array');
    // both channel and channels: refused naming the item, not silently reduced to one of them
    isError(t, await signedPost(srv, 'batch_events', { batch: [item(1), { name: 'x', channel: 'v', channels: ['v', 'w'], data: 'd' }] }), 400,
      /batch\[1\].*channel or channels, not both/, 'batch item with both channel and channels');
    isError(t, await signedPost(srv, 'events', { name: 'x', channel: 'v', channels: ['w'], data: 'd' }), 400, /channel or channels, not both/, 'event with both');
    isError(t, await signedPost(srv, 'batch_events', { batch: [item(1), 'nope'] }), 400, /object|batch/, 'batch item not an object');

    isError(t, await signedPost(srv, 'events', '{"name":"e",'), 400, /JSON/, 'invalid JSON');
    isError(t, await signedPost(srv, 'events', '[1,2]'), 400, /object/, 'JSON array instead of an object');
    isError(t, await signedPost(srv, 'batch_events', 'not json'), 400, /JSON/, 'invalid JSON in batch');
    isError(t, await signedPost(srv, 'events', ''), 400, /body|JSON/, 'empty body');
  });

  t.test('a batch with one invalid item publishes nothing', async (t) => {
    const [c] = await spreadClients(srv, 1);
    await subscribeAll(t, [c], 'atomic');
    const r = await signedPost(srv, 'batch_events', {
      batch: [{ name: 'first', channel: 'atomic', data: '1' }, { name: 'second', channel: 'bad channel', data: '2' }],
    });
    t.equal(r.status, 400);
    await signedPost(srv, 'events', { name: 'marker', channel: 'atomic', data: 'm' });
    await c.next(ofEvent('marker', 'atomic'));
    t.equal(c.frames.filter(ofEvent('first')).length, 0, 'the valid first item was not published');
  });

  t.test('request body over http.request_limit_in_mb (1 MB) → 413', async (t) => {
    const big = JSON.stringify({ name: 'big', channel: 'v', data: 'x'.repeat(1_500_000) });
    isError(t, await signedPost(srv, 'events', big, BIG), 413, /MB|large/i, '1.5 MB body');
    // The server reads an oversized body to its end before answering, so the client
    // reliably gets the 413 rather than a reset connection (EPIPE) while still sending.
    const bigger = JSON.stringify({ name: 'big', channel: 'v', data: 'x'.repeat(3_000_000) });
    for (let i = 0; i < 3; i++) isError(t, await signedPost(srv, 'events', bigger, BIG), 413, /MB|large/i, `3 MB body (#${i + 1})`);
    const under = JSON.stringify({ name: 'big', channel: 'v', data: 'x'.repeat(900_000) });
    const ok = await signedPost(srv, 'events', under, BIG);
    t.same({ status: ok.status, body: ok.json }, { status: 200, body: { ok: true } }, '0.9 MB body is fine (app payload limit 4 MB)');
    // The server still works after dropping an oversized upload.
    const r = await signedPost(srv, 'events', { name: 'after', channel: 'v', data: 'd' });
    t.same(r.json, { ok: true });
  });

  t.test('body over the limit without Content-Length (chunked upload) → 413', async (t) => {
    const path = `/apps/${BIG.id}/events`;
    const body = Buffer.from(JSON.stringify({ name: 'big', channel: 'v', data: 'y'.repeat(1_500_000) }));
    const q = signApiQuery(BIG.key, BIG.secret, 'POST', path, {}, body, now());
    const r = await new Promise<RawResponse>((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1', port: srv.port, method: 'POST', path: `${path}?${q}`, agent: false,
        headers: { connection: 'close', 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      }, (res) => readResponse(res).then(resolve, reject));
      req.on('error', reject);
      req.setTimeout(5000, () => req.destroy(new Error('chunked upload timed out')));
      for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
      req.end();
    });
    isError(t, r, 413, /MB|large/i, 'chunked 1.5 MB body');
  });
});
