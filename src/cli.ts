// `ringcast start [--config FILE]`, `ringcast check-config [--config FILE]`,
// `ringcast import soketi|sockudo FILE`, `ringcast drain [--config FILE]`, `ringcast --help`,
// `ringcast --version`.

import { existsSync } from 'node:fs';
import http from 'node:http';
import { checkConfig } from './check-config';
import { initAppStore } from './apps/init';
import { ConfigError, loadConfig } from './config';
import { tracingSettings } from './tracing/settings';
import type { Config } from './config/types';
import { assertSupported } from './config/support';
import { createLogger } from './log';
import { start } from './main';
import { reloadOnSighup } from './reload/primary';
import { IMPORT_USAGE, runImport } from './import';

const USAGE = `Usage:
  ringcast start [--config FILE]   start the server (default config: ./config.yaml if present)
  ringcast check-config [--config FILE]
                                   print the effective configuration (secrets masked), or
                                   its errors; exit status 0, or 78 when it is invalid
  ringcast app-store init [--config FILE]
                                   create ringcast's own apps table in the database of
                                   app_manager.driver (postgres, mysql, dynamodb)
${IMPORT_USAGE}
  ringcast drain [--config FILE]   ask the running node of that configuration to drain and
                                   stop, as SIGTERM (POST /drain on its metrics listener,
                                   with metrics.token)
  ringcast --help                  show this help
  ringcast --version               print the version

Every option of the config file can be overridden by its environment variable
(PORT, HOST, WORKERS, SERVICE_DEFAULT_APP_ID, ...): see README.md.`;

function version(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('../../package.json') as { version: string }).version;
}

/** `ringcast drain`: POST /drain on the configuration's metrics listener, with metrics.token. */
export function drainCommand(config: Config, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const m = config.metrics;
  if (!m.enabled) {
    err('ringcast drain: metrics.enabled is false: POST /drain is served on the metrics listener\n');
    return Promise.resolve(78);
  }
  if (!m.token) {
    err('ringcast drain: metrics.token is empty: the node refuses POST /drain without it\n');
    return Promise.resolve(78);
  }
  // a wildcard bind is reached on the loopback
  const host = m.host === '0.0.0.0' || m.host === '::' ? '127.0.0.1' : m.host;
  return new Promise((resolve) => {
    const req = http.request({ host, port: m.port, path: '/drain', method: 'POST', agent: false, headers: { authorization: `Bearer ${m.token}` }, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => { body += b.toString(); });
      res.on('end', () => {
        if (res.statusCode === 202) {
          out(`ringcast drain: ${host}:${m.port} is draining, then stops\n`);
          return resolve(0);
        }
        err(`ringcast drain: ${host}:${m.port} answered ${res.statusCode}: ${body.trim()}\n`);
        resolve(1);
      });
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', (e) => {
      err(`ringcast drain: could not reach the metrics listener on ${host}:${m.port}: ${e.message}\n`);
      resolve(1);
    });
    req.end();
  });
}

export async function main(argv: string[]): Promise<number> {
  const args = [...argv];
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (args.includes('--version') || args.includes('-v')) {
    process.stdout.write(version() + '\n');
    return 0;
  }
  const cmd = args.shift();
  if (cmd === 'import') return runImport(args, (s) => process.stdout.write(s), (s) => process.stderr.write(s));
  const sub = cmd === 'app-store' ? args.shift() : undefined;
  if (cmd === 'app-store' && sub !== 'init') {
    process.stderr.write(`ringcast: app-store ${sub === undefined ? 'needs a subcommand' : `has no subcommand "${sub}"`}: init\n\n${USAGE}\n`);
    return 2;
  }
  if (cmd !== 'start' && cmd !== 'check-config' && cmd !== 'app-store' && cmd !== 'drain') {
    process.stderr.write(`ringcast: ${cmd === undefined ? 'missing command' : `unknown command "${cmd}"`}\n\n${USAGE}\n`);
    return 2;
  }
  let file: string | null = null;
  while (args.length > 0) {
    const a = args.shift()!;
    if (a === '--config' || a === '-c') {
      const f = args.shift();
      if (!f) {
        process.stderr.write('ringcast: --config needs a file path\n');
        return 2;
      }
      file = f;
    } else if (a.startsWith('--config=')) {
      file = a.slice('--config='.length);
    } else {
      process.stderr.write(`ringcast: unknown option "${a}"\n\n${USAGE}\n`);
      return 2;
    }
  }
  if (file === null && existsSync('config.yaml')) file = 'config.yaml';
  if (cmd === 'check-config') {
    return checkConfig(file, process.env, (s) => process.stdout.write(s), (s) => process.stderr.write(s));
  }
  if (cmd === 'app-store') {
    return initAppStore(file, process.env, (s) => process.stdout.write(s), (s) => process.stderr.write(s));
  }

  let config;
  try {
    config = loadConfig({ file, env: process.env });
    assertSupported(config);
    tracingSettings(config.tracing, process.env); // a bad OTEL_* variable fails here, as a bad key does
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`ringcast: invalid configuration: ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  if (cmd === 'drain') return drainCommand(config, (s) => process.stdout.write(s), (s) => process.stderr.write(s));
  const log = createLogger(config.log);
  // Signal handlers go in before the shards start: a shard answers /up (and takes
  // clients) as soon as it listens, before start() resolves, and a SIGTERM in that
  // window must drain too, not kill the process. A second signal kills at once.
  let signalled = false;
  let onStop: (() => void) | null = null;
  const onSignal = (sig: NodeJS.Signals) => {
    log.info({ signal: sig }, 'shutting down');
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    signalled = true;
    onStop?.();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const hup = reloadOnSighup(file, log); // SIGHUP reloads the apps from the same file (reload/primary.ts)
  let server;
  try {
    server = await start(config, log);
  } catch (err) {
    log.fatal({ err }, 'could not start');
    return 1;
  }
  const running = server;
  hup.attach(running);
  if (process.env.RINGCAST_TEST_HOOKS === '1') {
    // Soak tests: SIGUSR2 = full GC in every thread (needs node --expose-gc), then a log line.
    process.on('SIGUSR2', () => {
      running.testGc().then((heaps) => log.warn({ rss: process.memoryUsage().rss, heaps }, 'test gc done'),
        (err: unknown) => log.error({ err }, 'test gc failed'));
    });
  }
  await new Promise<void>((resolve) => {
    onStop = () => void running.stop().then(resolve);
    void running.stopped.then(resolve); // also a stop asked over HTTP (POST /drain on the metrics listener)
    if (signalled) onStop();
  });
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err: unknown) => {
    process.stderr.write(`ringcast: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  });
}
