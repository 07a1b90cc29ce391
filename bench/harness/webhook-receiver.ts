// A webhook receiver for the benchmark targets with webhooks (bench/targets/ringcast.ts):
// its own process (run under the guard like a server), answering every POST with 200,
// after `--delay-ms` (a slow receiver) or at once. It reads each body whole, as a real
// receiver would. On SIGTERM it logs how many requests and events it got.
//
//   node dist/bench/harness/webhook-receiver.js --port P [--delay-ms D]

import http from 'node:http';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : def;
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`);
  return v;
}

const port = arg('port', 0);
const delay = arg('delay-ms', 0);
let requests = 0;
let events = 0;

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(200).end('ok'); // GET /up: ready
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => { body += c; });
  req.on('end', () => {
    requests++;
    // "events":[ … ]: counting names is enough for the summary (no JSON.parse per request)
    events += body.split('"name":').length - 1;
    if (delay > 0) setTimeout(() => res.writeHead(200).end('ok'), delay);
    else res.writeHead(200).end('ok');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`webhook receiver on 127.0.0.1:${port}, delay ${delay} ms\n`));
process.on('SIGTERM', () => {
  process.stdout.write(`webhook receiver: ${requests} requests, ${events} events\n`);
  process.exit(0);
});
