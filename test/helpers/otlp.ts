// A local OTLP/HTTP receiver for the tracing tests: a node http server that takes the
// JSON export requests of @opentelemetry/exporter-trace-otlp-http (POST /v1/traces) and
// keeps every span with its resource's attributes.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { eventually } from './server';

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number; arrayValue?: { values: AnyValue[] } };
interface KeyValue { key: string; value: AnyValue }

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  /** The resource's attributes (service.name, ringcast.thread). */
  resource: Record<string, unknown>;
}

function valueOf(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return v.arrayValue.values.map(valueOf);
  return undefined;
}

function attrs(kvs: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of kvs ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

export interface OtlpReceiver {
  /** The traces URL (http://127.0.0.1:<port>/v1/traces). */
  url: string;
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  base: string;
  spans: ReceivedSpan[];
  /** Export requests that were not JSON of the OTLP shape. */
  bad: number;
  /** The spans of a trace, once `done` holds of them (5 s at most). */
  waitFor(traceId: string, done: (spans: ReceivedSpan[]) => boolean, what: string): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const r = { bad: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces' || !/json/.test(req.headers['content-type'] ?? '')) throw new Error('not an OTLP/JSON export');
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: { resource?: { attributes?: KeyValue[] }; scopeSpans: { spans: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: KeyValue[] }[] }[] }[];
        };
        for (const rs of body.resourceSpans) {
          const resource = attrs(rs.resource?.attributes);
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              spans.push({ traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', name: s.name, kind: s.kind, attributes: attrs(s.attributes), resource });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        r.bad++;
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/v1/traces`,
    base,
    spans,
    get bad() { return r.bad; },
    async waitFor(traceId, done, what) {
      const of = () => spans.filter((s) => s.traceId === traceId);
      await eventually(() => done(of()), 5000, what);
      return of();
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
