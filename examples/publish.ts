// A backend publishing with the `pusher` server SDK: triggers one event on one or more
// channels of a running ringcast, then asks ringcast how many subscribers the first
// channel has.
//
//   make run                                                   (ringcast on :6001)
//   node dist/examples/publish.js --channel news --event headline --data '{"title":"hi"}'
//
// Options: --host 127.0.0.1 --port 6001, --channel (repeat it for several channels),
// --event, --data (JSON, or a plain string), --app-id / --key / --secret (default:
// config.yaml's app-id / app-key / app-secret). Exits 0 when ringcast accepted the event,
// 1 with ringcast's answer otherwise.

import Pusher from 'pusher';

export interface PublishOptions {
  host: string;
  port: number;
  channels: string[];
  event: string;
  data: unknown;
  appId?: string;
  key?: string;
  secret?: string;
}

export interface PublishResult {
  /** HTTP status of POST /apps/{id}/events. */
  status: number;
  /** subscription_count of the first channel after the publish. */
  subscriptionCount: number;
}

export async function publish(opts: PublishOptions): Promise<PublishResult> {
  if (opts.channels.length === 0) throw new Error('give at least one --channel');
  const sdk = new Pusher({
    appId: opts.appId ?? 'app-id', key: opts.key ?? 'app-key', secret: opts.secret ?? 'app-secret',
    host: opts.host, port: String(opts.port), useTLS: false,
  });
  // trigger() takes one channel or a list (at most the app's max_event_channels_at_once).
  const res = await sdk.trigger(opts.channels.length === 1 ? opts.channels[0] : opts.channels, opts.event, opts.data);
  const info = await sdk.get({ path: `/channels/${opts.channels[0]}`, params: { info: 'subscription_count' } });
  const body = (await info.json()) as { subscription_count?: number };
  return { status: res.status, subscriptionCount: body.subscription_count ?? 0 };
}

function args(name: string): string[] {
  const out: string[] = [];
  process.argv.forEach((a, i) => {
    if (a === `--${name}` && i + 1 < process.argv.length) out.push(process.argv[i + 1]);
  });
  return out;
}

function parseData(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

if (require.main === module) {
  publish({
    host: args('host')[0] ?? '127.0.0.1',
    port: Number(args('port')[0] ?? '6001'),
    channels: args('channel'),
    event: args('event')[0] ?? 'message',
    data: parseData(args('data')[0] ?? '{"text":"hello"}'),
    appId: args('app-id')[0],
    key: args('key')[0],
    secret: args('secret')[0],
  }).then(
    (r) => console.log(`published (HTTP ${r.status}); the first channel has ${r.subscriptionCount} subscriber(s)`),
    (e: unknown) => {
      // The SDK's RequestError carries ringcast's status and body.
      const err = e as { message?: string; status?: number; body?: string };
      console.error(`publish failed: ${err.status ? `HTTP ${err.status} ${err.body ?? ''}` : err.message ?? String(e)}`);
      process.exit(1);
    },
  );
}
