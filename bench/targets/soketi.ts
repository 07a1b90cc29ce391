// soketi 1.6.1, installed from the npm registry into a cache folder under os.tmpdir()
// (kept between runs), started with one app (app-id / app-key / app-secret).
//
// soketi 1.6.1 depends on uWebSockets.js v20.10 from GitHub; an npm `overrides` entry
// maps it to the registry build ringcast itself uses
// (@trufflesuite/uws-js-unofficial 20.30.0-unofficial.0), since newer uWS binaries need a
// newer glibc than Debian 12's. Install scripts are not run (--ignore-scripts): none of
// what soketi needs at run time has one. The cache is checked on every start (versions
// and the override) and reinstalled if anything is off.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { APP, baseEnv, freePort, launchServer, type TargetDef } from '../harness/target';

export const SOKETI_VERSION = '1.6.1';
export const UWS_OVERRIDE = 'npm:@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0';

export function soketiDir(): string {
  return process.env.RINGCAST_BENCH_SOKETI_DIR ?? path.join(os.tmpdir(), `ringcast-soketi-cache-${SOKETI_VERSION}`);
}

function readJson(file: string): Record<string, unknown> | null {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** null if the install in dir is complete and right, else what is wrong. */
export function checkInstall(dir: string): string | null {
  const s = readJson(path.join(dir, 'node_modules/@soketi/soketi/package.json'));
  if (s === null) return 'soketi is not installed';
  if (s.version !== SOKETI_VERSION) return `soketi ${String(s.version)} installed, want ${SOKETI_VERSION}`;
  // soketi's own node_modules must not hold another uWS; the hoisted one must be the override.
  if (fs.existsSync(path.join(dir, 'node_modules/@soketi/soketi/node_modules/uWebSockets.js'))) return 'a nested uWebSockets.js escaped the override';
  const u = readJson(path.join(dir, 'node_modules/uWebSockets.js/package.json'));
  if (u === null) return 'uWebSockets.js is missing';
  if (u.name !== '@trufflesuite/uws-js-unofficial' || u.version !== '20.30.0-unofficial.0') {
    return `uWebSockets.js resolves to ${String(u.name)}@${String(u.version)}, not the override`;
  }
  if (!fs.existsSync(path.join(dir, '.complete'))) return 'the install did not finish';
  return null;
}

function npm(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('npm', args, { cwd, timeout: 10 * 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`npm ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve();
    });
  });
}

export async function ensureSoketi(log: (msg: string) => void): Promise<string> {
  const dir = soketiDir();
  const problem = checkInstall(dir);
  if (problem === null) return dir;
  log(`soketi: ${problem}; installing @soketi/soketi@${SOKETI_VERSION} into ${dir} (npm registry, --ignore-scripts)`);
  const tmp = `${dir}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  fs.writeFileSync(path.join(tmp, 'package.json'), JSON.stringify({
    name: 'ringcast-bench-soketi',
    private: true,
    version: '0.0.0',
    dependencies: { '@soketi/soketi': SOKETI_VERSION },
    overrides: { 'uWebSockets.js': UWS_OVERRIDE },
  }, null, 2) + '\n');
  try {
    await npm(['install', '--ignore-scripts', '--no-audit', '--no-fund', '--omit=dev', '--loglevel=error'], tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), new Date().toISOString() + '\n');
    const after = checkInstall(tmp);
    if (after !== null) throw new Error(`soketi install is not usable: ${after}`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  log(`soketi: installed in ${dir}`);
  return dir;
}

export const soketiTarget: TargetDef = {
  name: 'soketi',
  label: `soketi ${SOKETI_VERSION}`,
  async prepare(log) {
    await ensureSoketi(log);
  },
  async start({ port, tmpDir }) {
    const dir = await ensureSoketi(() => undefined);
    const metricsPort = await freePort();
    return launchServer({
      name: 'soketi',
      cmd: process.execPath,
      args: [path.join(dir, 'node_modules/@soketi/soketi/bin/server.js'), 'start'],
      cwd: dir,
      env: {
        ...baseEnv(),
        SOKETI_HOST: '127.0.0.1',
        SOKETI_PORT: String(port),
        SOKETI_METRICS_SERVER_PORT: String(metricsPort),
        SOKETI_DEFAULT_APP_ID: APP.id,
        SOKETI_DEFAULT_APP_KEY: APP.key,
        SOKETI_DEFAULT_APP_SECRET: APP.secret,
        SOKETI_SHUTDOWN_GRACE_PERIOD: '1000',
        SOKETI_DEBUG: '0',
        // soketi refuses HTTP API traffic above this share of memory; keep it out of the way.
        SOKETI_HTTP_ACCEPT_TRAFFIC_MEMORY_THRESHOLD: '95',
        // silence the aws-sdk v2 end-of-support banner
        AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE: '1',
      },
      port,
      tmpDir,
      readyPath: '/',
      readyTimeoutMs: 60_000,
      stopGraceMs: 5000,
    });
  },
};
