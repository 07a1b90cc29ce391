import t from 'tap';
import { errorFrame, frame, subscriptionErrorFrame } from '../../src/protocol/frames';
import { isValidSocketId } from '../../src/protocol/socket-id';

t.test('frame', async (t) => {
  t.equal(frame('pusher:pong', {}), '{"event":"pusher:pong","data":{}}');
  t.equal(
    frame('pusher:connection_established', JSON.stringify({ socket_id: '1.2', activity_timeout: 120 })),
    '{"event":"pusher:connection_established","data":"{\\"socket_id\\":\\"1.2\\",\\"activity_timeout\\":120}"}',
    'string data stays a JSON string',
  );
  t.equal(frame('e', { a: [1, 'x'] }, 'ch'), '{"event":"e","channel":"ch","data":{"a":[1,"x"]}}', 'key order event, channel, data');
  t.equal(frame('pusher:cache_miss', undefined, 'c'), '{"event":"pusher:cache_miss","channel":"c"}', 'no data');
  t.equal(frame('e', null), '{"event":"e","data":null}');
  t.equal(frame('e', 0), '{"event":"e","data":0}');
  t.equal(frame('e', '', ''), '{"event":"e","channel":"","data":""}');
  const tricky = 'quote " backslash \\ newline \n unicode é \u2028';
  t.same(JSON.parse(frame(tricky, tricky, tricky)), { event: tricky, channel: tricky, data: tricky });
});

t.test('errorFrame', async (t) => {
  t.equal(errorFrame('pusher:error', 4001, 'App key x does not exist'), '{"event":"pusher:error","data":{"code":4001,"message":"App key x does not exist"}}');
  t.equal(errorFrame('proto:error', 4301, 'nope', 'private-a'), '{"event":"proto:error","channel":"private-a","data":{"code":4301,"message":"nope"}}');
  t.equal(errorFrame('pusher:error', null, 'x'), '{"event":"pusher:error","data":{"code":null,"message":"x"}}');
  t.same(JSON.parse(errorFrame('pusher:error', 4000, 'bad "json"\n')), { event: 'pusher:error', data: { code: 4000, message: 'bad "json"\n' } });
});

t.test('subscriptionErrorFrame', async (t) => {
  t.equal(
    subscriptionErrorFrame('pusher:subscription_error', 'private-a', 'AuthError', 'Invalid signature', 401),
    '{"event":"pusher:subscription_error","channel":"private-a","data":{"type":"AuthError","error":"Invalid signature","status":401}}',
  );
});

t.test('socket ids', async (t) => {
  for (const s of ['1.2', '123456.7890123', '0.0']) t.ok(isValidSocketId(s), s);
  for (const s of ['1', '1.', '.1', '1.2.3', 'a.b', ' 1.2', '1.2 ', '1.2\n', '-1.2', '', null, 1.2, undefined, '1'.repeat(40) + '.' + '1'.repeat(40)]) {
    t.notOk(isValidSocketId(s), JSON.stringify(s));
  }
});
