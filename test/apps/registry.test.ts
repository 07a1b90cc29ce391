import t from 'tap';
import { AppRegistry } from '../../src/apps/registry';
import { loadConfig } from '../../src/config';

const cfg = loadConfig({
  env: {},
  overrides: { apps: [{ id: 'a1', key: 'k1', secret: 's1' }, { id: 'a2', key: 'k2', secret: 's2', enabled: false }, { id: 3, key: 'k3', secret: 's3' }] },
});

t.test('lookups', async (t) => {
  const reg = new AppRegistry(cfg.apps);
  t.equal(reg.byId('a1'), cfg.apps[0]);
  t.equal(reg.byKey('k2'), cfg.apps[1], 'disabled apps are still found (close 4003, not 4001)');
  t.equal(reg.byId('3')?.key, 'k3');
  t.equal(reg.byId('k1'), undefined, 'ids and keys are separate namespaces');
  t.equal(reg.byKey('a1'), undefined);
  t.equal(reg.byId('nope'), undefined);
  t.equal(reg.all(), cfg.apps);
  t.equal(reg.size, 3);
});

t.test('index is the stable position in config.apps', async (t) => {
  const reg = new AppRegistry(cfg.apps);
  t.same(cfg.apps.map((a) => reg.index(a)), [0, 1, 2]);
  const clone = structuredClone(cfg.apps); // what a worker thread receives
  const workerReg = new AppRegistry(clone);
  t.same(clone.map((a) => reg.index(a)), [0, 1, 2], 'indexes by id, not identity');
  t.same(cfg.apps.map((a) => workerReg.index(a)), [0, 1, 2]);
  t.throws(() => reg.index({ id: 'ghost' }), RangeError);
});

t.test('rejects duplicates', async (t) => {
  const [a, b] = cfg.apps;
  t.throws(() => new AppRegistry([a, { ...b, id: a.id }]), /duplicate app id "a1"/);
  t.throws(() => new AppRegistry([a, { ...b, key: a.key }]), /duplicate app key "k1"/);
  t.equal(new AppRegistry([]).size, 0);
});
