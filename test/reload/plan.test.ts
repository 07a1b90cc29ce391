// The reload planner (reload/plan.ts) and the registry's swap (apps/registry.ts), without
// threads: what counts as added / removed / changed / disabled, stable counter slots, the
// slot capacity, and a registry swap that refuses a bad list without changing anything.

import t from 'tap';
import { AppRegistry, initialSlots } from '../../src/apps/registry';
import { ReloadError, planReload, slotCapacity } from '../../src/reload/plan';
import { loadConfig, type AppInput } from '../../src/config';

const cfg = (apps: AppInput[], extra: object = {}) => loadConfig({ env: {}, overrides: { apps, ...extra } });
const app = (id: string, extra: Partial<AppInput> = {}): AppInput => ({ id, key: `${id}-key`, secret: `${id}-secret`, ...extra });

t.test('added, removed, changed, disabled; unchanged apps are not named', async (t) => {
  const before = cfg([app('a'), app('b'), app('c'), app('d', { enabled: false })]);
  const next = cfg([app('a'), app('b', { max_connections: 5 }), app('c', { enabled: false }), app('d'), app('e')]);
  const plan = planReload(before, initialSlots(before.apps), next, 10);
  t.same(plan.added, ['e']);
  t.same(plan.removed, []);
  t.same(plan.changed, ['b', 'c', 'd']);
  t.same(plan.disabled, ['c'], 'only enabled → disabled');
  t.same(plan.slots, { a: 0, b: 1, c: 2, d: 3, e: 4 });
  t.same(plan.restartKeys, []);
  const removed = planReload(before, initialSlots(before.apps), cfg([app('c')]), 10);
  t.same(removed.removed, ['a', 'b', 'd']);
  t.same(removed.slots, { a: 0, b: 1, c: 2, d: 3 }, 'removed ids keep their slots');
});

t.test('a removed id that comes back gets its old slot; new ids never reuse one', async (t) => {
  const one = cfg([app('a'), app('b')]);
  const two = cfg([app('b'), app('c')]);
  const p1 = planReload(one, initialSlots(one.apps), two, 10);
  t.same(p1.slots, { a: 0, b: 1, c: 2 });
  const p2 = planReload({ ...one, apps: two.apps }, p1.slots, cfg([app('a'), app('d')]), 10);
  t.same(p2.slots, { a: 0, b: 1, c: 2, d: 3 });
});

t.test('past the slot capacity the reload is refused', async (t) => {
  const one = cfg([app('a')]);
  t.throws(() => planReload(one, initialSlots(one.apps), cfg([app('a'), app('b'), app('c')]), 2),
    { code: 'RC_ERR_RELOAD', message: /cannot add app "c": this process has room for 2 app ids in all; restart ringcast/ });
  t.ok(new ReloadError('x') instanceof Error);
  t.equal(slotCapacity(3), 1027, '1024 spare slots');
});

t.test('settings other than apps are named as needing a restart', async (t) => {
  const a = cfg([app('a')]);
  const b = cfg([app('a')], { port: 7001, websocket: { activity_timeout: 30 } });
  t.same(planReload(a, initialSlots(a.apps), b, 10).restartKeys, ['port', 'websocket']);
});

t.test('registry: slots from the plan, a bad list changes nothing', async (t) => {
  const c = cfg([app('a'), app('b')]);
  const reg = new AppRegistry(c.apps);
  t.equal(reg.index({ id: 'b' }), 1);
  const next = cfg([app('b'), app('c')]);
  reg.replace(next.apps, { a: 0, b: 1, c: 2 });
  t.equal(reg.index({ id: 'c' }), 2);
  t.equal(reg.index({ id: 'b' }), 1);
  t.equal(reg.byKey('a-key'), undefined);
  t.throws(() => reg.index({ id: 'a' }), RangeError, 'a removed app has no index');
  t.throws(() => reg.replace([...next.apps, next.apps[0]], { b: 1, c: 2 }), /duplicate app id "b"/);
  t.throws(() => reg.replace(cfg([app('z')]).apps, { b: 1 }), /no counter slot for app id "z"/);
  t.equal(reg.byId('c')?.key, 'c-key', 'still the last good list');
  t.equal(reg.size, 2);
});
