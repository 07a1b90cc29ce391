// ringcast from this checkout's build (dist/), as its own process so that its RSS and
// CPU are measured alone: `node bin/ringcast.js start --config <tmp yaml>` with a
// config holding one app (app-id / app-key / app-secret) and `workers: N`.

import fs from 'node:fs';
import path from 'node:path';
import { APP, baseEnv, freePort, launchServer, type RunningTarget, type TargetDef } from '../harness/target';

/** The checkout root: dist/bench/targets/ringcast.js → ../../.. */
export function ringcastRoot(): string {
  return process.env.RINGCAST_BENCH_ROOT ?? path.resolve(__dirname, '..', '..', '..');
}

/** Every webhook event type (the targets with webhooks configure them all). */
const ALL_EVENTS = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'client_event', 'cache_miss', 'subscription_count'];

/**
 * `extra`: more environment and node flags for the server (the soak test's GC hook);
 * `yaml` / `appYaml`: more top-level config lines, and more lines of the app (bench/filters/);
 * `webhooks`: configure every webhook event type against a receiver process on this
 * machine (bench/harness/webhook-receiver.ts) answering after `delayMs` (0: at once).
 */
export function ringcastTarget(workers: number, extra: { env?: Record<string, string>; nodeArgs?: string[]; yaml?: string[]; appYaml?: string[]; webhooks?: { delayMs: number; batching?: boolean }; base?: string } = {}): TargetDef {
  const wh = extra.webhooks;
  const name = wh ? `ringcast-${workers}-wh${wh.delayMs > 0 ? '-slow' : ''}${wh.batching ? '-batch' : ''}` : `ringcast-${workers}${extra.base ? '-base' : ''}`;
  // `base`: another checkout's build (RINGCAST_BENCH_BASE_ROOT), for before / after pairs
  // interleaved in one run (bench/README.md, "Before and after")
  const rootOf = () => extra.base ?? ringcastRoot();
  return {
    name,
    label: wh
      ? `ringcast workers:${workers}, webhooks (all types${wh.batching ? ', batched' : ''}, receiver ${wh.delayMs > 0 ? `answering after ${wh.delayMs} ms` : 'answering at once'})`
      : `ringcast workers:${workers}${extra.base ? ` (base build ${extra.base})` : ''}`,
    async prepare() {
      const cli = path.join(rootOf(), 'dist', 'src', 'cli.js');
      if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: build first (make build)`);
    },
    async start({ port, tmpDir }) {
      const root = rootOf();
      const file = path.join(tmpDir, `${name}-${port}.yaml`);
      let receiver: RunningTarget | null = null;
      if (wh) {
        const rport = await freePort();
        receiver = await launchServer({
          name: `${name}-receiver`, cmd: process.execPath,
          args: [path.join(root, 'dist', 'bench', 'harness', 'webhook-receiver.js'), '--port', String(rport), '--delay-ms', String(wh.delayMs)],
          cwd: root, env: baseEnv(), port: rport, tmpDir, readyPath: '/up', stopGraceMs: 2000,
        });
      }
      const hooks = receiver ? [
        `    webhooks: [{url: "http://127.0.0.1:${receiver.port}/hooks", event_types: [${ALL_EVENTS.join(', ')}]}]`,
      ] : [];
      const batching = wh?.batching ? ['webhooks:', '  batching: {enabled: true}'] : [];
      fs.writeFileSync(file, [
        '# written by bench/targets/ringcast.ts',
        'host: 127.0.0.1',
        `port: ${port}`,
        `workers: ${workers}`,
        'shutdown_grace_period: 3000',
        ...(extra.yaml ?? []),
        ...batching,
        'log:',
        '  level: warn',
        'apps:',
        `  - id: ${APP.id}`,
        `    key: ${APP.key}`,
        `    secret: ${APP.secret}`,
        // The spec's default API bucket is 1,000 requests/s per app; soketi's default app
        // has no limit. A throughput benchmark measures the engine, not the limiter.
        '    max_client_events_per_second: 10000000',
        ...(extra.appYaml ?? []).map((l) => `    ${l}`),
        ...hooks,
        '',
      ].join('\n'));
      const server = await launchServer({
        name,
        cmd: process.execPath,
        // RINGCAST_BENCH_NODE_ARGS: extra node flags for the server, e.g. profiling:
        // RINGCAST_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"
        args: [...(process.env.RINGCAST_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), ...(extra.nodeArgs ?? []),
          path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
        cwd: root,
        // the load generators' connections come from a few loopback addresses: no per-address
        // cap (an env var, which a base build without the key ignores)
        env: { ...baseEnv(), LIMITS_MAX_CONNECTIONS_PER_IP: '2147483647', ...extra.env },
        port,
        tmpDir,
        readyPath: '/up',
        stopGraceMs: 6000,
      }).catch(async (err: unknown) => {
        await receiver?.stop();
        throw err;
      });
      if (!receiver) return server;
      const r = receiver;
      return { ...server, alive: () => server.alive(), exitReport: () => server.exitReport(), stop: () => server.stop().then(() => r.stop()) };
    },
  };
}
