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

export function ringcastTarget(workers: number): TargetDef {
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
        'log:',
        '  level: warn',
        'apps:',
        `  - id: ${APP.id}`,
        `    key: ${APP.key}`,
        `    secret: ${APP.secret}`,
        '',
      ].join('\n'));
      return launchServer({
        name: `ringcast-${workers}`,
        cmd: process.execPath,
        args: [path.join(root, 'bin', 'ringcast.js'), 'start', '--config', file],
        cwd: root,
        env: baseEnv(),
        port,
        tmpDir,
        readyPath: '/up',
        stopGraceMs: 6000,
      });
    },
  };
}
