// test-modes: once (no server threads: the tracing keys and OTEL_* variables, resolved alone)
// What turns traces on, where they go and how they are sampled (src/tracing/settings.ts),
// and the clear error of each value that cannot be used: a bad tracing key at load, a bad
// OTEL_* variable at start (cli: exit 78 like any invalid configuration).

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config';
import { tracingSettings } from '../../src/tracing/settings';
import { start } from '../../src/main';

const APPS = [{ id: 'a', key: 'k', secret: 's' }];
const cfg = (tracing: Record<string, unknown> = {}) => loadConfig({ env: {}, overrides: { apps: APPS, tracing } }).tracing;

t.test('off by default; on from the key or from an OTEL_* variable alone', async (t) => {
  t.equal(tracingSettings(cfg(), {}), null, 'nothing set: off');
  t.same(tracingSettings(cfg({ enabled: true }), {}), { url: 'http://localhost:4318/v1/traces', sampler: 'parentbased_traceidratio', ratio: 1, serviceName: 'ringcast' });
  t.equal(tracingSettings(cfg(), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://col:4318/' })?.url, 'http://col:4318/v1/traces', 'the base endpoint + /v1/traces');
  t.equal(tracingSettings(cfg(), { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://col/x' })?.url, 'https://col/x', 'the traces endpoint as is');
  t.equal(tracingSettings(cfg({ endpoint: 'http://mine:4318/v1/traces' }), { OTEL_TRACES_EXPORTER: 'otlp' })?.url, 'http://mine:4318/v1/traces', 'OTEL_TRACES_EXPORTER=otlp, the endpoint key');
  t.equal(tracingSettings(cfg({ endpoint: 'http://mine/v1/traces' }), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:1' })?.url, 'http://env:1/v1/traces', 'the variable wins over the key');
  t.equal(tracingSettings(cfg({ enabled: true }), { OTEL_SDK_DISABLED: 'true' }), null, 'OTEL_SDK_DISABLED=true wins');
  t.equal(tracingSettings(cfg({ enabled: true }), { OTEL_TRACES_EXPORTER: 'none' }), null, 'OTEL_TRACES_EXPORTER=none wins');
  t.ok(tracingSettings(cfg({ enabled: true }), { OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: '' }), 'false and empty variables change nothing');
});

t.test('sampler and service name', async (t) => {
  const on = cfg({ enabled: true, sample_ratio: 0.25, service_name: 'edge' });
  t.match(tracingSettings(on, {}), { sampler: 'parentbased_traceidratio', ratio: 0.25, serviceName: 'edge' });
  t.match(tracingSettings(on, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }), { sampler: 'traceidratio', ratio: 0.5 });
  t.match(tracingSettings(on, { OTEL_TRACES_SAMPLER: 'always_off' }), { sampler: 'always_off' });
  t.match(tracingSettings(on, { OTEL_SERVICE_NAME: 'svc' }), { serviceName: 'svc' });
  t.match(tracingSettings(on, { OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,service.name=from%20attrs' }), { serviceName: 'from attrs' });
});

t.test('a value that cannot be used: a ConfigError naming it', async (t) => {
  const on = cfg({ enabled: true });
  const bad: [Record<string, string>, RegExp][] = [
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /^OTEL_TRACES_SAMPLER "sometimes" is not one of always_on, always_off, traceidratio/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, /^OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, not "2"/],
    [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, /^OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1/],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER "zipkin" is not supported: ringcast exports traces with otlp/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'col:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL "grpc" is not supported: ringcast sends OTLP over HTTP as JSON/],
  ];
  for (const [env, re] of bad) {
    t.throws(() => tracingSettings(on, env), re, Object.keys(env).join(', '));
    const key = Object.keys(env).at(-1)!;
    try {
      tracingSettings(on, env);
    } catch (err) {
      t.ok(err instanceof ConfigError && err.key === key && err.code === 'RC_ERR_CONFIG', `${key}: the error names it`);
    }
  }
  t.throws(() => cfg({ sample_ratio: 1.5 }), /tracing\.sample_ratio must be a number from 0 to 1/);
  t.throws(() => cfg({ endpoint: 'collector:4318' }), /tracing\.endpoint must be an http:\/\/ or https:\/\/ URL, or empty/);

  // start() refuses it before anything starts
  process.env.OTEL_TRACES_SAMPLER = 'sometimes';
  try {
    await t.rejects(start(loadConfig({ env: {}, overrides: { apps: APPS, port: 0, workers: 1, tracing: { enabled: true } } })), /OTEL_TRACES_SAMPLER "sometimes"/);
  } finally {
    delete process.env.OTEL_TRACES_SAMPLER;
  }
});

t.test('the cli: a bad OTEL_* variable is an invalid configuration (exit 78)', async (t) => {
  const bin = path.resolve(__dirname, '../../../bin/ringcast.js');
  const r = spawnSync(process.execPath, [bin, 'start'], {
    encoding: 'utf8', timeout: 20_000,
    env: { ...process.env, SERVICE_DEFAULT_APP_ID: 'a', SERVICE_DEFAULT_APP_KEY: 'k', SERVICE_DEFAULT_APP_SECRET: 's', PORT: '0', OTEL_TRACES_EXPORTER: 'jaeger' },
  });
  t.equal(r.status, 78, r.stderr);
  t.match(r.stderr, /ringcast: invalid configuration: OTEL_TRACES_EXPORTER "jaeger" is not supported/);
});
