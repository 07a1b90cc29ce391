// test-modes: once (the board against the exported metric names, which do not depend on the shard count)
// ops/grafana/ringcast.json against the real /metrics of a running server: every metric a
// panel (or a template variable) queries is exported, and every ringcast metric the
// server exports is on the board (a metric added without a panel fails here).

import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { APP, RawClient, WORKERS, startServer } from '../helpers/server';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BOARD = path.join(ROOT, 'ops', 'grafana', 'ringcast.json');
const PREFIX = 'ringcast_';

interface Panel { id?: number; type: string; title?: string; targets?: { expr?: string }[]; panels?: Panel[]; gridPos?: { x: number; y: number; w: number; h: number } }
interface Board { uid: string; panels: Panel[]; templating: { list: { query?: unknown; definition?: string }[] } }

function flatten(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...flatten(p.panels ?? [])]);
}

/** Metric names in a PromQL expression (the board's names all carry the default prefix). */
function names(expr: string): string[] {
  return [...expr.matchAll(/\bringcast_[a-zA-Z0-9_]+/g)].map((m) => m[0]);
}

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics answered ${res.statusCode}`))));
    }).on('error', reject);
  });
}

const board = JSON.parse(readFileSync(BOARD, 'utf8')) as Board;
const panels = flatten(board.panels);
const queried = new Map<string, string[]>(); // metric → panel titles
for (const p of panels) {
  for (const target of p.targets ?? []) {
    for (const n of names(target.expr ?? '')) queried.set(n, [...(queried.get(n) ?? []), p.title ?? '?']);
  }
}
for (const v of board.templating.list) {
  for (const n of names(JSON.stringify(v.query ?? '') + (v.definition ?? ''))) queried.set(n, [...(queried.get(n) ?? []), 'template variable']);
}

t.test('the board is well formed', async (t) => {
  t.equal(board.uid, 'ringcast');
  const ids = panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  const graphs = panels.filter((p) => p.type !== 'row');
  for (const p of graphs) {
    t.ok(p.title, 'every panel has a title');
    t.ok((p.targets ?? []).length > 0 && p.targets!.every((x) => (x.expr ?? '').length > 0), `${p.title}: has queries`);
    const g = p.gridPos!;
    t.ok(g.x >= 0 && g.x + g.w <= 24, `${p.title}: within the 24-column grid`);
  }
  // no two panels overlap
  for (let i = 0; i < graphs.length; i++) {
    for (let j = i + 1; j < graphs.length; j++) {
      const a = graphs[i].gridPos!, b = graphs[j].gridPos!;
      const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
      if (overlap) t.fail(`${graphs[i].title} overlaps ${graphs[j].title}`);
    }
  }
});

t.test('the board shows what an operator needs', async (t) => {
  const must = {
    connections: 'connections_active',
    'messages in': 'messages_received_total',
    'messages out': 'messages_sent_total',
    'API latency histogram': 'http_request_duration_seconds_bucket',
    'rate-limit refusals': 'rate_limit_exceeded_total',
    'slow consumers': 'websocket_buffer_full_total',
    'bus spill': 'bus_spill_bytes',
    'shard restarts': 'shard_restarts_total',
    'adapter publishes': 'adapter_publish_total',
    'adapter errors': 'adapter_errors_total',
    'deaf-node transport renewals': 'cluster_transport_renewals_total',
    'history stored messages': 'history_messages',
    'history stored bytes': 'history_bytes',
    'history evictions': 'history_evictions_total',
    'history rewinds': 'history_rewinds_total',
    'history recoveries by result': 'history_recoveries_total',
    'history missed-message fetches by result': 'history_catchups_total',
    'idempotent hits': 'idempotent_hits_total',
    'idempotency window Redis errors': 'idempotency_errors_total',
  };
  for (const [what, metric] of Object.entries(must)) t.ok(queried.has(PREFIX + metric), `${what}: ${PREFIX}${metric} is queried`);
});

t.test(`every metric the board queries is exported by /metrics, and every ringcast metric is on the board (workers ${WORKERS})`, async (t) => {
  const srv = await startServer({ metrics: { enabled: true, host: '127.0.0.1', port: 0 }, delta_compression: { enabled: true } });
  t.teardown(() => srv.stop());
  // Some traffic first, so that labelled series exist as well as their # TYPE lines.
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  await c.subscribe('board');
  await srv.sdk(APP).trigger('board', 'ev', {});
  await c.event('ev', 'board', 5000);
  const text = await scrape(srv.server.metricsPort!);
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1], m[2]);
  t.ok(types.size > 20, `the scrape lists ${types.size} metrics`);

  const exported = (n: string): boolean => {
    if (types.has(n)) return true;
    const base = n.replace(/_(bucket|sum|count)$/, '');
    return base !== n && (types.get(base) === 'histogram' || types.get(base) === 'summary');
  };
  t.ok(queried.size > 20, `the board queries ${queried.size} metrics`);
  for (const [n, where] of queried) t.ok(exported(n), `${n} (${where.join(', ')}) is exported`);

  const own = [...types.keys()].filter((n) => n.startsWith(PREFIX) && !/^ringcast_(process|nodejs)_/.test(n));
  for (const n of own) {
    const onBoard = queried.has(n) || (types.get(n) === 'histogram' && queried.has(n + '_bucket'));
    t.ok(onBoard, `${n} is on the board`);
  }
});
