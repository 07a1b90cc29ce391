// ringcast from this checkout's build (dist/), as its own process so that its RSS and
// CPU are measured alone: `node bin/ringcast.js start --config <tmp yaml>` with a
// config holding one app (app-id / app-key / app-secret) and `workers: N`.

import fs from 'node:fs';
import path from 'node:path';
import { APP, baseEnv, launchServer, type TargetDef } from '../harness/target';

/** The checkout root: dist/bench/targets/ringcast.js → ../../.. */
export function ringcastRoot(): string {
  return process.env.RINGCAST_BENCH_ROOT ?? path.resolve(__dirname, '..', '..', '..');
}

/** `extra`: more environment and node flags for the server (the soak test's GC hook). */
/** `yaml` / `appYaml`: more top-level config lines, and more lines of the app (bench/filters/). */
export function ringcastTarget(workers: number, extra: { env?: Record<string, string>; nodeArgs?: string[]; yaml?: string[]; appYaml?: string[] } = {}): TargetDef {
  return {
    name: `ringcast-${workers}`,
    label: `ringcast workers:${workers}`,
    async prepare() {
      const cli = path.join(ringcastRoot(), 'dist', 'src', 'cli.js');
      if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: build first (make build)`);
    },
    start({ port, tmpDir }) {
      const root = ringcastRoot();
      const file = path.join(tmpDir, `ringcast-${workers}-${port}.yaml`);
      fs.writeFileSync(file, [
        '# written by bench/targets/ringcast.ts',
        'host: 127.0.0.1',
        `port: ${port}`,
        `workers: ${workers}`,
        'shutdown_grace_period: 3000',
        ...(extra.yaml ?? []),
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
        '',
      ].join('\n'));
      return launchServer({
        name: `ringcast-${workers}`,
        cmd: process.execPath,
        // RINGCAST_BENCH_NODE_ARGS: extra node flags for the server, e.g. profiling:
        // RINGCAST_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"
        args: [...(process.env.RINGCAST_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), ...(extra.nodeArgs ?? []),
          path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
        cwd: root,
        env: { ...baseEnv(), ...extra.env },
        port,
        tmpDir,
        readyPath: '/up',
        stopGraceMs: 6000,
      });
    },
  };
}
