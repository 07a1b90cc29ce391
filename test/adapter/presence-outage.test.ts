// test-modes: once (its nodes have fixed shard counts)
// test-split: LOGIC_BACKENDS (every test is inside the loop over the backends: one process per backend)
// Presence across nodes through a backend outage (adapter/presence.ts), for the logic
// backends: members that joined or left on either node while the backend was down reach
// the other node's clients once it is back (member_added / member_removed, once each),
// and the members the HTTP API lists count every node again. Shorter than the nodes'
// timeout (default cluster health, 30 s), so neither node is declared failed: what makes
// it good is the whole state each node sends when its backend is reachable again.
//
// "Once" is checked with a positive marker: a member joining on the other node after the
// backend is back, whose member_added comes after anything the resync could have caused.

import t, { type Test } from 'tap';
import { signedGet } from '../helpers/http';
import { APP, eventually, RawClient, type Frame } from '../helpers/server';
import { startNodePair } from '../helpers/cluster';
import { LOGIC_BACKENDS as BACKENDS, startBackend } from './backends';

const data = (f: Frame): { user_id: string } => (typeof f.data === 'string' ? JSON.parse(f.data) : f.data) as { user_id: string };

/** The member events a client got after frame `from`: "added:carol". */
function memberEvents(c: RawClient, from = 0): string[] {
  const out: string[] = [];
  for (const f of (c.frames as Frame[]).slice(from)) {
    if (f.event === 'pusher_internal:member_added') out.push(`added:${data(f).user_id}`);
    if (f.event === 'pusher_internal:member_removed') out.push(`removed:${data(f).user_id}`);
  }
  return out;
}

/** The members each client's subscription_succeeded listed. */
const known = new Map<RawClient, string[]>();

async function join(t: Test, url: string, channel: string, user: string): Promise<RawClient> {
  const c = await RawClient.connect(url);
  t.teardown(() => c.close().catch(() => undefined));
  const r = await c.subscribeAuthed(channel, { user_id: user, user_info: { name: user } });
  t.equal(r.event, 'pusher_internal:subscription_succeeded', `${user} joined`);
  known.set(c, Object.keys((JSON.parse(r.data as string) as { presence: { hash: object } }).presence.hash));
  return c;
}

for (const name of BACKENDS) {
  t.test(`${name}: presence changes lost in a backend outage are made good when it is back`, async (t) => {
    const backend = await startBackend(name);
    t.teardown(() => backend.stop());
    // default cluster health (30 s timeout): nobody is declared failed around the outage
    const cfg = { ...backend.config(), workers: 2, apps: [APP] };
    const [a, b] = await startNodePair(t, cfg);

    const channel = `presence-outage-${name}`;
    const wendy = await join(t, a.wsUrl(), channel, 'wendy'); // watches on node A
    const walt = await join(t, b.wsUrl(), channel, 'walt'); // watches on node B
    const bob = await join(t, b.wsUrl(), channel, 'bob');
    // a member of the other node is in the snapshot, or comes one backend hop later
    const knows = (c: RawClient, user: string) => known.get(c)!.includes(user) || memberEvents(c).includes(`added:${user}`);
    // walt's member_added of bob (same node) may come after bob's subscription_succeeded: in
    // the count below it would look like a second one
    await eventually(() => knows(wendy, 'walt') && knows(wendy, 'bob') && knows(walt, 'wendy') && knows(walt, 'bob'), 10_000,
      'both watchers to know every member');
    const [fromA, fromB] = [wendy.frames.length, walt.frames.length];

    await backend.kill();
    await eventually(() => !a.server.cluster!.isUp() && !b.server.cluster!.isUp(), 10_000, 'both nodes to see the backend down');
    await bob.close(); // leaves on node B
    await join(t, b.wsUrl(), channel, 'carol'); // joins on node B
    await join(t, a.wsUrl(), channel, 'dave'); // joins on node A
    await backend.resume();
    await eventually(() => a.server.cluster!.isUp() && b.server.cluster!.isUp(), 20_000, 'both nodes to reconnect');

    // (each watcher hears its own node's changes at once: wait for the other node's by name)
    await eventually(() => memberEvents(wendy, fromA).includes('removed:bob') && memberEvents(wendy, fromA).includes('added:carol'), 15_000,
      'node A\'s watcher to hear what happened on node B during the outage');
    await eventually(() => memberEvents(walt, fromB).includes('added:dave'), 15_000, 'node B\'s watcher to hear what happened on node A during the outage');
    // the markers: one more member on each node
    await join(t, b.wsUrl(), channel, 'erin');
    await join(t, a.wsUrl(), channel, 'frank');
    const got = (c: RawClient, from: number, ...events: string[]) => events.every((e) => memberEvents(c, from).includes(e));
    await eventually(() => got(wendy, fromA, 'added:erin', 'added:frank') && got(walt, fromB, 'added:frank', 'added:erin'), 10_000, 'the markers');

    const seenA = memberEvents(wendy, fromA);
    const iErin = seenA.indexOf('added:erin');
    // node A's own joins (dave; frank, the other marker) may come at any place: local, no hop
    t.same(seenA.slice(0, iErin).filter((e) => e !== 'added:dave' && e !== 'added:frank').sort(), ['added:carol', 'removed:bob'],
      'node A: bob\'s leave and carol\'s join on node B, lost in the outage, once each');
    t.same(seenA.filter((e) => e === 'added:dave' || e === 'added:frank').sort(), ['added:dave', 'added:frank'], 'node A: dave and frank (local) once each');
    const seenB = memberEvents(walt, fromB);
    const iFrank = seenB.indexOf('added:frank');
    // node B's own joins (carol and erin, the other marker) and bob's leave are local, no hop
    t.same(seenB.slice(0, iFrank).filter((e) => e !== 'added:erin').sort(), ['added:carol', 'added:dave', 'removed:bob'],
      'node B: dave\'s join on node A once; bob and carol (local) once each');

    for (const srv of [a, b]) {
      const users = await signedGet(srv.port, APP, `channels/${channel}/users`);
      t.same((users.json.users as { id: string }[]).map((u) => u.id).sort(), ['carol', 'dave', 'erin', 'frank', 'walt', 'wendy'], 'the members of the whole cluster');
    }
  });
}
