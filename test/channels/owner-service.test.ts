import t from 'tap';
import type { ControlMsg, PresenceJoinReply } from '../../src/bus/messages';
import { CacheStore } from '../../src/channels/cache';
import { createOwnerService, isOwnerMsg, type OwnerService } from '../../src/channels/owner-service';
import type { MemberMsg, Outgoing } from '../../src/channels/publisher';
import { loadConfig } from '../../src/config';
import { AppRegistry } from '../../src/apps/registry';
import { eventually } from '../helpers/server';

// The owner side without threads: messages in, replies / broadcasts / hooks out.

const noLog = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as never;

function service(opts: { countEvents?: boolean; maxMembers?: number; cluster?: boolean } = {}) {
  const config = loadConfig({
    env: {},
    overrides: {
      apps: [{
        id: 'a', key: 'k', secret: 's',
        subscription_count_events: opts.countEvents ?? false,
        max_presence_members_per_channel: opts.maxMembers ?? 100,
      }],
    },
  });
  const published: Outgoing[] = [];
  const members: MemberMsg[] = [];
  const replies: { to: number; req: number; body: unknown }[] = [];
  const events: string[] = [];
  /** What the owner told the other nodes (in a cluster). */
  const told: string[] = [];
  const svc: OwnerService = createOwnerService({
    cluster: opts.cluster ? {
      memberChanged: (m) => told.push(`${m.op} ${m.channel} ${String(m.userId)}`),
      countChanged: (c) => told.push(`count ${c.channel} ${c.total}`),
    } : null,
    shards: 4,
    apps: new AppRegistry(config.apps),
    defaultMaxMembers: 100,
    publisher: { publishOne: (m) => published.push(m), member: (m) => members.push(m) },
    reply: (to, req, body) => replies.push({ to, req, body }),
    cacheStore: new CacheStore(),
    log: noLog,
    out: (e) => e,
    countDelayMs: 5,
    hooks: {
      occupied: (app, ch) => events.push(`occupied ${ch}`),
      vacated: (app, ch) => events.push(`vacated ${ch}`),
      memberAdded: (app, ch, id) => events.push(`added ${ch} ${String(id)}`),
      memberRemoved: (app, ch, id) => events.push(`removed ${ch} ${String(id)}`),
    },
  });
  let req = 0;
  const ask = (msg: Record<string, unknown>, from = 1) => {
    const m = { ...msg, req: ++req, from } as unknown as ControlMsg;
    if (!isOwnerMsg(m)) throw new Error('not an owner message');
    svc.handle(m, from);
    return replies.find((r) => r.req === req)?.body;
  };
  const tell = (msg: Record<string, unknown>, from = 1) => {
    const m = msg as unknown as ControlMsg;
    if (!isOwnerMsg(m)) throw new Error('not an owner message');
    svc.handle(m, from);
  };
  t.teardown(() => svc.stop());
  return { svc, published, members, replies, events, told, ask, tell };
}

t.test('subscriptions: occupied once, counts across shards, vacated once', async (t) => {
  const s = service();
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 0, delta: 1 });
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 2, delta: 1 });
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 2, delta: 1 });
  t.same(s.ask({ type: 'channel_info', app: 'a', channel: 'c' }), { occupied: true, subscription_count: 3, user_count: null });
  t.same(s.ask({ type: 'channels_list', app: 'a', prefix: '' }), [['c', null]]);
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 2, delta: -1 });
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 2, delta: -1 });
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 2, delta: -1 }); // one too many: ignored
  t.same(s.ask({ type: 'channel_info', app: 'a', channel: 'c' }), { occupied: true, subscription_count: 1, user_count: null });
  s.tell({ type: 'sub', app: 'a', channel: 'c', shard: 0, delta: -1 });
  t.same(s.events, ['occupied c', 'vacated c']);
  t.same(s.ask({ type: 'channels_list', app: 'a', prefix: '' }), []);
  t.same(s.published, [], 'no subscription_count without the app option');
});

t.test('presence: a user with tabs on two shards is added once and removed once', async (t) => {
  const s = service();
  const join = (shard: number, socketId: string, userId: unknown) =>
    s.ask({ type: 'presence_join', app: 'a', channel: 'presence-p', socketId, userId, userInfo: { n: String(userId) } }, shard) as PresenceJoinReply;
  const r1 = join(0, '1.1', 'u1');
  t.same(r1, { ok: true, members: [['u1', { n: 'u1' }]] }, 'the snapshot includes the joiner');
  join(3, '3.1', 'u1');
  const r3 = join(3, '3.2', 7);
  t.same(r3, { ok: true, members: [['u1', { n: 'u1' }], [7, { n: '7' }]] }, 'numeric ids keep their type');
  t.same(s.members.map((m) => `${m.op} ${String(m.userId)} except ${m.except}`), ['added u1 except 1.1', 'added 7 except 3.2'],
    'member_added once per user, never to the joining socket');
  t.same(s.ask({ type: 'channel_info', app: 'a', channel: 'presence-p' }), { occupied: true, subscription_count: 3, user_count: 2 });
  s.tell({ type: 'presence_leave', app: 'a', channel: 'presence-p', socketId: '1.1', userKey: 'u1', shard: 0 });
  t.equal(s.members.length, 2, 'u1 still has a tab on shard 3: no member_removed');
  s.tell({ type: 'presence_leave', app: 'a', channel: 'presence-p', socketId: '3.1', userKey: 'u1', shard: 3 });
  t.same(s.members.slice(2).map((m) => `${m.op} ${String(m.userId)}`), ['removed u1']);
  t.same(s.ask({ type: 'members', app: 'a', channel: 'presence-p' }), [[7, { n: '7' }]]);
  t.same(s.events, ['occupied presence-p', 'added presence-p u1', 'added presence-p 7', 'removed presence-p u1']);
});

t.test('presence: the member limit refuses a new user, not another tab of a member', async (t) => {
  const s = service({ maxMembers: 1 });
  const join = (socketId: string, userId: string) =>
    s.ask({ type: 'presence_join', app: 'a', channel: 'presence-p', socketId, userId, userInfo: null }) as PresenceJoinReply;
  t.equal(join('1.1', 'u1').ok, true);
  t.equal(join('1.2', 'u1').ok, true, 'a second tab of the same user');
  t.match(join('1.3', 'u2'), { ok: false, type: 'LimitReached', status: 4100 });
});

t.test('subscription_count: coalesced, after the window, through the publisher', async (t) => {
  const s = service({ countEvents: true });
  for (let i = 0; i < 5; i++) s.tell({ type: 'sub', app: 'a', channel: 'c', shard: i % 4, delta: 1 });
  s.tell({ type: 'sub', app: 'a', channel: 'presence-x', shard: 0, delta: 1 });
  await eventually(() => s.published.length > 0, 2000, 'a subscription_count');
  t.equal(s.published.length, 1, 'five changes, one event');
  t.match(s.published[0], { kind: 'count', channel: 'c', message: '{"event":"pusher_internal:subscription_count","channel":"c","data":"{\\"subscription_count\\":5}"}' });
});

t.test('cache entries: set, get, and a miss', async (t) => {
  const s = service();
  s.tell({ type: 'cache_set', app: 'a', channel: 'cache-x', message: '{"event":"e"}', ttl: 60 });
  t.match(s.ask({ type: 'cache_get', app: 'a', channel: 'cache-x' }), { message: '{"event":"e"}' });
  t.equal(s.ask({ type: 'cache_get', app: 'a', channel: 'cache-y' }), null);
});

t.test('only owner messages are the service\'s', async (t) => {
  t.equal(isOwnerMsg({ type: 'terminate_user', app: 'a', userId: 'u' }), false);
  t.equal(isOwnerMsg({ type: 'reply', req: 1, body: null }), false);
  t.equal(isOwnerMsg({ type: 'sub', app: 'a', channel: 'c', shard: 0, delta: 1 }), true);
});

// ── In a cluster (adapter/presence.ts): other nodes' members and counts ───────

const memberOps = (members: MemberMsg[]) => members.map((m) => `${m.op} ${String(m.userId)}`);

t.test('cluster: a user another node has is not added again; the last node to lose them removes them', (t) => {
  const { members, events, told, ask, tell } = service({ cluster: true });
  const ch = 'presence-c';
  tell({ type: 'remote_member', op: 'added', node: 'n2', app: 'a', channel: ch, userId: 'u', userInfo: { n: 2 } });
  t.same(memberOps(members), ['added u'], 'a remote user new to the cluster: member_added to local clients');
  t.same(events, [], 'no hook: the node of the transition sends the webhook');
  const reply = ask({ type: 'presence_join', app: 'a', channel: ch, socketId: '1.1', userId: 'u', userInfo: { n: 1 } }) as PresenceJoinReply;
  t.ok(reply.ok, 'joined');
  t.same(memberOps(members), ['added u'], 'the same user joining here: no second member_added');
  t.same(told.filter((x) => !x.startsWith('count')), ['added presence-c u'], 'the other nodes are told of the node-local join');
  t.notOk(events.includes('added presence-c u'), 'and no member_added hook (another node had the user)');
  tell({ type: 'presence_leave', app: 'a', channel: ch, socketId: '1.1', userKey: 'u', shard: 1 });
  t.same(memberOps(members), ['added u'], 'leaving here while node n2 has the user: no member_removed');
  tell({ type: 'remote_member', op: 'removed', node: 'n2', app: 'a', channel: ch, userId: 'u', userInfo: null });
  t.same(memberOps(members), ['added u', 'removed u'], 'the last node lost them: member_removed once');
  t.end();
});

t.test('cluster: the snapshot and the member limit include the other nodes\' members', (t) => {
  const { ask, tell } = service({ cluster: true, maxMembers: 2 });
  const ch = 'presence-l';
  tell({ type: 'remote_member', op: 'added', node: 'n2', app: 'a', channel: ch, userId: 'r', userInfo: null });
  const first = ask({ type: 'presence_join', app: 'a', channel: ch, socketId: '1.1', userId: 'u1', userInfo: null }) as PresenceJoinReply;
  t.ok(first.ok && first.members.map(([id]) => id).sort().join() === 'r,u1', 'snapshot has the remote member');
  const second = ask({ type: 'presence_join', app: 'a', channel: ch, socketId: '1.2', userId: 'u2', userInfo: null }) as PresenceJoinReply;
  t.equal(second.ok, false, 'a third user over the cluster is refused (limit 2)');
  t.end();
});

t.test('cluster: a gone node\'s members go (member_removed to local clients)', (t) => {
  const { members, events, tell } = service({ cluster: true });
  tell({ type: 'remote_member', op: 'added', node: 'n2', app: 'a', channel: 'presence-g', userId: 'u', userInfo: null });
  tell({ type: 'remote_count', node: 'n2', app: 'a', channel: 'presence-g', total: 1 });
  tell({ type: 'remote_node_gone', node: 'n2' });
  t.same(memberOps(members), ['added u', 'removed u'], 'member_removed to local clients');
  t.same(events, [], 'no hook: the primary decides the cluster\'s webhooks (adapter/transitions.ts)');
  t.end();
});

t.test('cluster: the owner sends no occupancy or member hooks (the primary decides them for the cluster)', (t) => {
  const { events, ask, tell } = service({ cluster: true });
  tell({ type: 'sub', app: 'a', channel: 'c1', shard: 0, delta: 1 });
  ask({ type: 'presence_join', app: 'a', channel: 'presence-h', socketId: '1.1', userId: 'u', userInfo: null });
  tell({ type: 'presence_leave', app: 'a', channel: 'presence-h', socketId: '1.1', userKey: 'u', shard: 1 });
  tell({ type: 'sub', app: 'a', channel: 'c1', shard: 0, delta: -1 });
  t.same(events, [], 'none');
  const single = service();
  single.tell({ type: 'sub', app: 'a', channel: 'c1', shard: 0, delta: 1 });
  single.tell({ type: 'sub', app: 'a', channel: 'c1', shard: 0, delta: -1 });
  t.same(single.events, ['occupied c1', 'vacated c1'], 'on a single node the owner does');
  t.end();
});

t.test('cluster: subscription_count adds the other nodes\' counts', async (t) => {
  const { published, tell } = service({ cluster: true, countEvents: true });
  tell({ type: 'sub', app: 'a', channel: 'cnt', shard: 0, delta: 1 });
  tell({ type: 'remote_count', node: 'n2', app: 'a', channel: 'cnt', total: 4 });
  await eventually(() => published.some((m) => m.message.includes('"subscription_count\\":5')), 2000, 'a count of 5');
  t.pass('1 here + 4 on node n2');
});
