import t from 'tap';
import { Ev, isClientEvent, normalizeIncomingEvent, outName, outNames } from '../../src/protocol/events';
import { CloseMessage, ErrorCode, SubscriptionStatus } from '../../src/protocol/codes';

t.test('normalizeIncomingEvent', async (t) => {
  t.equal(normalizeIncomingEvent('proto:subscribe'), 'pusher:subscribe');
  t.equal(normalizeIncomingEvent('proto_internal:x'), 'pusher_internal:x');
  t.equal(normalizeIncomingEvent('pusher:ping'), 'pusher:ping');
  t.equal(normalizeIncomingEvent('pusher_internal:x'), 'pusher_internal:x');
  t.equal(normalizeIncomingEvent('client-proto:x'), 'client-proto:x');
  t.equal(normalizeIncomingEvent('protocol:x'), 'protocol:x');
  t.equal(normalizeIncomingEvent('proto'), 'proto');
  t.equal(normalizeIncomingEvent('prototype'), 'prototype');
  t.equal(normalizeIncomingEvent(''), '');
  t.equal(normalizeIncomingEvent('Proto:x'), 'Proto:x');
});

t.test('outName / outNames', async (t) => {
  t.equal(outName('pusher:pong', 'proto'), 'proto:pong');
  t.equal(outName('pusher_internal:member_added', 'proto'), 'proto_internal:member_added');
  t.equal(outName('pusher:pong', 'pusher'), 'pusher:pong');
  t.equal(outName('my-event', 'proto'), 'my-event');
  t.equal(outName('client-x', 'proto'), 'client-x');
  const p = outNames('proto');
  t.equal(p.SubscriptionSucceeded, 'proto_internal:subscription_succeeded');
  t.equal(p.Error, 'proto:error');
  t.equal(outNames('pusher').Delta, Ev.Delta);
  t.equal(outNames('proto'), p, 'built once per prefix');
  t.ok(Object.isFrozen(p));
  for (const [k, v] of Object.entries(Ev)) {
    t.match(v, /^pusher(_internal)?:[a-z_]+$/, k);
    t.equal(normalizeIncomingEvent(outName(v, 'proto')), v, `${k} round-trips`);
  }
});

t.test('isClientEvent', async (t) => {
  t.ok(isClientEvent('client-typing'));
  t.ok(isClientEvent('client-'));
  t.notOk(isClientEvent('clienttyping'));
  t.notOk(isClientEvent('pusher:client-x'));
  t.notOk(isClientEvent('Client-x'));
});

t.test('codes', async (t) => {
  t.same(ErrorCode, {
    Malformed: 4000, AppNotFound: 4001, AppDisabled: 4003, OverQuota: 4004, Unauthorized: 4009,
    OverCapacity: 4100, ShuttingDown: 4200, PongTimeout: 4201, ClientEventRefused: 4301, RateLimited: 4301,
  });
  t.equal(CloseMessage[ErrorCode.Unauthorized], 'Origin not allowed', 'spec text');
  for (const code of Object.values(ErrorCode)) {
    const m = CloseMessage[code];
    t.ok(typeof m === 'string' && m.length > 0, `message for ${code}`);
    t.ok(Buffer.byteLength(m) <= 123, 'fits a close reason');
  }
  t.equal(SubscriptionStatus.AuthFailed, 401);
  t.equal(SubscriptionStatus.InvalidFilter, 4000);
});
