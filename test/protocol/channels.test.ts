import t from 'tap';
import {
  cacheTtl, channelType, isCacheChannel, isEncrypted, isPresence, isPrivateLike, isServerToUser, serverToUserId,
  validateChannelName, validateEventName,
} from '../../src/protocol/channels';

t.test('channel types', async (t) => {
  t.equal(channelType('my-channel'), 'public');
  t.equal(channelType('private-a'), 'private');
  t.equal(channelType('private-encrypted-a'), 'private-encrypted');
  t.equal(channelType('presence-a'), 'presence');
  t.equal(channelType('presence-cache-a'), 'presence');
  t.equal(channelType('cache-a'), 'public');
  t.equal(channelType('privatea'), 'public');
  t.equal(channelType('Private-a'), 'public', 'prefixes are case-sensitive');
  t.ok(isPresence('presence-a'));
  t.notOk(isPresence('private-a'));
  for (const n of ['private-a', 'private-encrypted-a', 'presence-a']) t.ok(isPrivateLike(n), n);
  for (const n of ['a', 'cache-a', 'privat-a', '#server-to-user-1']) t.notOk(isPrivateLike(n), n);
  t.ok(isEncrypted('private-encrypted-x'));
  t.notOk(isEncrypted('private-x'));
  t.ok(isServerToUser('#server-to-user-u1'));
  t.equal(serverToUserId('#server-to-user-u1'), 'u1');
  t.equal(serverToUserId('server-to-user-u1'), null);
});

t.test('valid names', async (t) => {
  for (const n of [
    'a', 'my-channel', 'private-a_b=c@d,e.f;g', 'presence-room.1', 'ABCxyz0189', '-', '=@,.;_',
    'x'.repeat(200), 'foo#cache-60', 'private-foo#cache-1', 'cache-foo', '#server-to-user-u1',
    '#server-to-user-user@example.com', 'a#cache-0060',
  ]) t.equal(validateChannelName(n, 200), null, n);
});

t.test('invalid names say what is wrong', async (t) => {
  const bad: Array<[unknown, string]> = [
    [undefined, 'channel name must be a string'],
    [42, 'channel name must be a string'],
    [null, 'channel name must be a string'],
    ['', 'channel name is empty'],
    ['x'.repeat(201), 'channel name is longer than 200 characters'],
    ['my channel', "channel name contains an invalid character ' '"],
    ['a/b', "channel name contains an invalid character '/'"],
    ['a:b', "channel name contains an invalid character ':'"],
    ['a*', "channel name contains an invalid character '*'"],
    ["a'b", "channel name contains an invalid character '\\''"],
    ['a\nb', "channel name contains an invalid character '\\n'"],
    ['a\u0000b', "channel name contains an invalid character '\\u0000'"],
    ['a\u007fb', "channel name contains an invalid character '\\u007f'"],
    ['a\ud800b', "channel name contains an invalid character '\\ud800'"],
    ['café', "channel name contains an invalid character 'é'"],
    ['chat-😀', "channel name contains an invalid character '😀'"],
    ['ｆｕｌｌ', "channel name contains an invalid character 'ｆ'"],
    ['a#b', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#cache-', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#cache-x', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#cache-60x', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#cache-60#cache-60', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['#server-to-user', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#server-to-user-u1', "channel name contains '#' outside the reserved '#cache-<ttl>' suffix and '#server-to-user-' prefix"],
    ['a#cache-0', "cache TTL in '#cache-0' must be a positive integer of seconds"],
    ['a#cache-99999999999999999999', "cache TTL in '#cache-99999999999999999999' must be a positive integer of seconds"],
    ['#cache-60', "channel name has nothing before the '#cache-' suffix"],
    ['#server-to-user-', "channel name '#server-to-user-' has no user id"],
    ['#server-to-user-a b', "channel name contains an invalid character ' ' in the user id"],
    ['#server-to-user-u1#cache-60', "channel name contains an invalid character '#' in the user id"],
  ];
  for (const [n, msg] of bad) t.equal(validateChannelName(n, 200), msg, JSON.stringify(n));
});

t.test('max length is the caller\'s (app max_channel_name_length)', async (t) => {
  t.equal(validateChannelName('abcde', 5), null);
  t.equal(validateChannelName('abcdef', 5), 'channel name is longer than 5 characters');
  t.equal(validateChannelName('a#cache-60', 9), 'channel name is longer than 9 characters', 'suffix counts toward length');
  t.equal(validateChannelName('#server-to-user-u1', 17), 'channel name is longer than 17 characters');
});

t.test('cacheTtl', async (t) => {
  t.equal(cacheTtl('cache-a', 3600), 3600);
  t.equal(cacheTtl('private-cache-a', 3600), 3600);
  t.equal(cacheTtl('presence-cache-a', 10), 10);
  t.equal(cacheTtl('private-encrypted-cache-a', 3600), 3600);
  t.equal(cacheTtl('a#cache-60', 3600), 60);
  t.equal(cacheTtl('private-a#cache-5', 3600), 5);
  t.equal(cacheTtl('cache-a#cache-30', 3600), 30, 'suffix wins over prefix');
  t.equal(cacheTtl('a#cache-007', 3600), 7);
  t.equal(cacheTtl('a', 3600), null);
  t.equal(cacheTtl('', 3600), null);
  t.equal(cacheTtl('private-a', 3600), null);
  t.equal(cacheTtl('cachea', 3600), null);
  t.equal(cacheTtl('mycache-a', 3600), null);
  t.equal(cacheTtl('private-encrypted-a', 3600), null);
  t.equal(cacheTtl('a#cache-0', 3600), null);
  t.equal(cacheTtl('a#cache-', 3600), null);
  t.equal(cacheTtl('a-cache-60', 3600), null);
  t.equal(cacheTtl('cache-a#cache-0', 3600), 3600, 'invalid suffix falls back to the prefix form');
  t.ok(isCacheChannel('cache-x'));
  t.notOk(isCacheChannel('x'));
});

t.test('event names', async (t) => {
  t.equal(validateEventName('my-event', 200), null);
  t.equal(validateEventName('client-x', 200), null);
  t.equal(validateEventName('e'.repeat(200), 200), null);
  t.equal(validateEventName('e'.repeat(201), 200), 'event name is longer than 200 characters');
  t.equal(validateEventName('', 200), 'event name is empty');
  t.equal(validateEventName(undefined, 200), 'event name must be a string');
  t.equal(validateEventName({}, 200), 'event name must be a string');
});
