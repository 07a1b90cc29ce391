// What turns traces on and how they are sampled and exported: the `tracing:` keys of the
// configuration, overridden by the standard OpenTelemetry environment variables (the
// names and meanings of the OpenTelemetry SDK environment specification), so that an
// operator who knows OpenTelemetry needs nothing of ours:
//
//   off        OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none (these win over all)
//   on         tracing.enabled, or OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint variable
//   endpoint   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is) > OTEL_EXPORTER_OTLP_ENDPOINT
//              + /v1/traces > tracing.endpoint > http://localhost:4318/v1/traces
//   sampler    OTEL_TRACES_SAMPLER (+ OTEL_TRACES_SAMPLER_ARG) > parentbased_traceidratio
//              with tracing.sample_ratio
//   service    OTEL_SERVICE_NAME > service.name of OTEL_RESOURCE_ATTRIBUTES > tracing.service_name
//
// Pure: the caller passes the environment (only main.ts and shard/worker.ts read it).
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and _COMPRESSION are read by the exporter itself.

import { ConfigError } from '../config/checker';
import type { Config } from '../config/types';

export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

export const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

export interface TracingSettings {
  /** The OTLP/HTTP (JSON) traces URL. */
  url: string;
  sampler: SamplerName;
  /** The ratio of the *traceidratio samplers (0 … 1). */
  ratio: number;
  serviceName: string;
}

/** A tracing variable that cannot be used: a ConfigError keyed by the variable's name. */
function bad(name: string, message: string): ConfigError {
  return new ConfigError(name, message);
}

const DEFAULT_URL = 'http://localhost:4318/v1/traces';

function set(env: NodeJS.ProcessEnv, name: string): string | null {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? null : v;
}

function checkUrl(name: string, url: string): string {
  let ok = false;
  try {
    const u = new URL(url);
    ok = u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    ok = false;
  }
  if (!ok) throw bad(name, `${name} must be an http:// or https:// URL, not ${JSON.stringify(url)}`);
  return url;
}

function ratioOf(raw: string | null, fallback: number): number {
  if (raw === null) return fallback;
  const r = Number(raw);
  if (!/^\s*[0-9.eE+-]+\s*$/.test(raw) || !Number.isFinite(r) || r < 0 || r > 1) {
    throw bad('OTEL_TRACES_SAMPLER_ARG', `OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, not ${JSON.stringify(raw)}`);
  }
  return r;
}

function serviceNameOf(env: NodeJS.ProcessEnv, fallback: string): string {
  const name = set(env, 'OTEL_SERVICE_NAME');
  if (name !== null) return name;
  const attrs = set(env, 'OTEL_RESOURCE_ATTRIBUTES');
  if (attrs !== null) {
    for (const pair of attrs.split(',')) {
      const eq = pair.indexOf('=');
      if (eq > 0 && pair.slice(0, eq).trim() === 'service.name') {
        const v = decodeURIComponentSafe(pair.slice(eq + 1).trim());
        if (v !== '') return v;
      }
    }
  }
  return fallback;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The settings traces run with, or null when they are off. Throws ConfigError on a value that cannot be used. */
export function tracingSettings(cfg: Config['tracing'], env: NodeJS.ProcessEnv): TracingSettings | null {
  const disabled = set(env, 'OTEL_SDK_DISABLED');
  if (disabled !== null && disabled.toLowerCase() === 'true') return null;
  const exporter = set(env, 'OTEL_TRACES_EXPORTER');
  const exporters = exporter === null ? [] : exporter.split(',').map((e) => e.trim().toLowerCase()).filter((e) => e !== '');
  for (const e of exporters) {
    if (e !== 'otlp' && e !== 'none') throw bad('OTEL_TRACES_EXPORTER', `OTEL_TRACES_EXPORTER ${JSON.stringify(e)} is not supported: ringcast exports traces with otlp (OTLP over HTTP) or none`);
  }
  if (exporters.includes('none')) return null;
  const tracesUrl = set(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseUrl = set(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const on = cfg.enabled || exporters.includes('otlp') || tracesUrl !== null || baseUrl !== null;
  if (!on) return null;
  const protocol = set(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol !== null && protocol !== 'http/json') {
    throw bad('OTEL_EXPORTER_OTLP_PROTOCOL', `OTEL_EXPORTER_OTLP_PROTOCOL ${JSON.stringify(protocol)} is not supported: ringcast sends OTLP over HTTP as JSON (http/json)`);
  }
  let url: string;
  if (tracesUrl !== null) url = checkUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesUrl);
  else if (baseUrl !== null) url = checkUrl('OTEL_EXPORTER_OTLP_ENDPOINT', baseUrl).replace(/\/+$/, '') + '/v1/traces';
  else url = cfg.endpoint !== '' ? cfg.endpoint : DEFAULT_URL;
  const samplerRaw = set(env, 'OTEL_TRACES_SAMPLER');
  let sampler: SamplerName = 'parentbased_traceidratio';
  if (samplerRaw !== null) {
    const s = samplerRaw.toLowerCase() as SamplerName;
    if (!SAMPLERS.includes(s)) throw bad('OTEL_TRACES_SAMPLER', `OTEL_TRACES_SAMPLER ${JSON.stringify(samplerRaw)} is not one of ${SAMPLERS.join(', ')}`);
    sampler = s;
  }
  const ratio = ratioOf(set(env, 'OTEL_TRACES_SAMPLER_ARG'), samplerRaw === null ? cfg.sample_ratio : 1);
  return { url, sampler, ratio, serviceName: serviceNameOf(env, cfg.service_name) };
}
