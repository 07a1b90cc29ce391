// Hostile clients at full size (the hostile-client acceptance), against ringcast from this
// checkout's build in its own process (bench/targets/ringcast.ts), so that RSS is the
// server's alone (VmRSS of its pid):
//
//   1. one anonymous socket subscribing to 100,000 channels;
//   2. four sockets with 4,000-value `in` filters on 25 channels each;
//   3. 32 unauthenticated POSTs of 10 MiB at once;
//   4. a socket flooding frames for 8 s (reconnecting when closed) while another pings
//      every 20 ms.
//
// Pass: in each, the server's RSS grows by at most 64 MiB and a probe connection opened
// every 200 ms is established within a second; in 4, the pinger's p99 is under 100 ms.
// The scenarios are test/helpers/hostile.ts (the suite runs them scaled down:
// test/faults/hostile.test.ts). Exit status 0 only if every check passed.
//
//   make build && node dist/bench/hostile/hostile.js [--workers N] [--flood-seconds S]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bigFilters, bigPosts, flood, subscribeMany, type HostileTarget, type Measured } from '../../test/helpers/hostile';
import { killAllNow } from '../harness/procs';
import { APP, freePort, rssKb } from '../harness/target';
import { ringcastTarget } from '../targets/ringcast';

const MiB = 1024 * 1024;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  if (i === -1) return dflt;
  const n = Number(process.argv[i + 1]);
  if (!(n > 0)) throw new Error(`${name} must be a positive number`);
  return n;
}

async function main(): Promise<number> {
  const workers = arg('--workers', 4);
  const floodSeconds = arg('--flood-seconds', 8);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ringcast-hostile-'));
  const port = await freePort();
  const server = await ringcastTarget(workers, { yaml: ['tag_filtering: {enabled: true}'] }).start({ port, tmpDir: tmp });
  const target: HostileTarget = { port, appId: APP.id, appKey: APP.key, rss: () => rssKb(server.pid) * 1024 };
  let failed = 0;
  const check = (ok: boolean, what: string) => {
    if (!ok) failed++;
    console.log(`${ok ? 'ok    ' : 'FAILED'} ${what}`);
  };
  const bounded = (name: string, m: Measured) => {
    check(m.rssGrowth <= 64 * MiB, `${name}: server RSS grew ${(m.rssGrowth / MiB).toFixed(1)} MiB (≤ 64)`);
    check(m.acceptMaxMs < 1000, `${name}: new connections established within ${m.acceptMaxMs.toFixed(0)} ms (< 1000)`);
  };
  try {
    console.log(`ringcast workers:${workers}, host ${os.cpus().length} cores, node ${process.version}`);
    const subs = await subscribeMany(target, 100_000, 60_000);
    console.log(`  subscribe x100,000: ${subs.succeeded} accepted, ${subs.limitReached} LimitReached, closed ${subs.closeCode}`);
    check(subs.succeeded <= 1000, 'one socket holds at most limits.max_subscriptions_per_connection');
    bounded('100,000 subscribes', subs);

    const filters = await bigFilters(target, 4, 25, 4000, 60_000);
    console.log(`  4,000-value filters: ${filters.succeeded} accepted, ${filters.refused} refused`);
    bounded('4 x 25 filters of 4,000 values', filters);

    const posts = await bigPosts(target, 32, 10 * MiB, 60_000);
    console.log(`  32 x 10 MiB unauthenticated: statuses ${[...new Set(posts.statuses)].join(', ')}, slowest answer ${posts.slowestMs.toFixed(0)} ms`);
    check(posts.statuses.every((s) => s === 401), 'every unauthenticated POST answered 401');
    bounded('32 x 10 MiB POSTs', posts);

    const f = await flood(target, floodSeconds);
    console.log(`  flood ${floodSeconds} s: ${f.sent} frames sent, ${f.closes.length} closes (${[...new Set(f.closes)].join(', ')}), ${f.pings} pings, p99 ${f.p99.toFixed(1)} ms`);
    check(f.p99 < 100, `the pinger's p99 ${f.p99.toFixed(1)} ms (< 100)`);
    bounded('frame flood', f);
  } finally {
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(failed === 0 ? 'all checks passed' : `${failed} check(s) failed`);
  return failed === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  killAllNow();
  process.exit(2);
});
