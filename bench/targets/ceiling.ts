// The ceiling: the least a uWebSockets.js server must do to pass the harness's traffic,
// with the uWS build ringcast uses, on one thread. No protocol checks, no auth.
//
//   WS  /app/:key   → sends {"event":"pusher:connection_established",...} on open;
//                     pusher:subscribe → ws.subscribe(channel) + subscription_succeeded;
//                     pusher:ping → pusher:pong. Anything else is ignored.
//   POST /apps/:id/events → the body (Pusher's {name, channels, data}) is parsed only to
//                     learn the channels, and {"event","channel","data"} is published to
//                     each channel's topic natively (app.publish); the signature and every
//                     limit are ignored; answers 200 {}.
//   GET  /          → 200 "OK" (readiness).
//
// Socket settings match ringcast's defaults (1 MiB backpressure, no compression).
// Run as a program: `node dist/bench/targets/ceiling.js --port 6001`.

import os from 'node:os';
import path from 'node:path';
import { launchServer, type TargetDef } from '../harness/target';

export const ceilingTarget: TargetDef = {
  name: 'ceiling',
  label: 'ceiling (bare uWS)',
  start: ({ port, tmpDir }) => launchServer({
    name: 'ceiling',
    cmd: process.execPath,
    args: [path.join(__dirname, 'ceiling.js'), '--port', String(port)],
    cwd: os.tmpdir(),
    env: { PATH: process.env.PATH ?? '' },
    port,
    tmpDir,
    readyPath: '/',
    stopGraceMs: 2000,
  }),
};

function serve(port: number): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const uWS = require('uWebSockets.js') as typeof import('uWebSockets.js');
  let nextId = 1;
  const established = (): string =>
    '{"event":"pusher:connection_established","data":' +
    JSON.stringify(JSON.stringify({ socket_id: `1.${nextId++}`, activity_timeout: 120 })) + '}';
  const PONG = '{"event":"pusher:pong","data":"{}"}';
  const sockets = new Set<import('uWebSockets.js').WebSocket<unknown>>();

  const app = uWS.App();
  app.ws('/app/:key', {
    compression: uWS.DISABLED,
    maxPayloadLength: 256 * 1024,
    maxBackpressure: 1024 * 1024,
    closeOnBackpressureLimit: 0,
    idleTimeout: 128,
    sendPingsAutomatically: true,
    open: (ws) => {
      sockets.add(ws);
      ws.send(established(), false);
    },
    message: (ws, message) => {
      let m: { event?: string; data?: { channel?: string } };
      try {
        m = JSON.parse(Buffer.from(message).toString('utf8')) as typeof m;
      } catch {
        return;
      }
      if (m.event === 'pusher:subscribe' && typeof m.data?.channel === 'string') {
        const ch = m.data.channel;
        ws.subscribe(ch);
        ws.send('{"event":"pusher_internal:subscription_succeeded","channel":' + JSON.stringify(ch) + ',"data":"{}"}', false);
      } else if (m.event === 'pusher:ping') {
        ws.send(PONG, false);
      }
    },
    close: (ws) => {
      sockets.delete(ws);
    },
  });

  app.post('/apps/:id/events', (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    res.onData((ab, isLast) => {
      chunks.push(Buffer.from(ab.slice(0)));
      if (!isLast || aborted) return;
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      let status = '200 OK';
      let reply = '{}';
      try {
        const ev = JSON.parse(body.toString('utf8')) as { name: string; channels: string[]; data: string };
        const tail = ',"data":' + JSON.stringify(ev.data) + '}';
        const head = '{"event":' + JSON.stringify(ev.name) + ',"channel":';
        for (const ch of ev.channels) app.publish(ch, head + JSON.stringify(ch) + tail, false);
      } catch {
        status = '400 Bad Request';
        reply = '{"error":"bad body"}';
      }
      res.cork(() => {
        res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(reply);
      });
    });
  });

  app.get('/*', (res) => {
    res.end('OK');
  });

  let listenSocket: import('uWebSockets.js').us_listen_socket | null = null;
  app.listen('127.0.0.1', port, (ls) => {
    if (!ls) {
      process.stderr.write(`ceiling: cannot listen on 127.0.0.1:${port}\n`);
      process.exit(1);
    }
    listenSocket = ls;
    process.stdout.write(`ceiling listening on 127.0.0.1:${port}\n`);
  });

  const shutdown = (): void => {
    if (listenSocket) uWS.us_listen_socket_close(listenSocket);
    listenSocket = null;
    for (const ws of [...sockets]) ws.end(1001, 'shutdown');
    setTimeout(() => process.exit(0), 50);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

if (require.main === module) {
  const i = process.argv.indexOf('--port');
  const port = i >= 0 ? Number(process.argv[i + 1]) : 6001;
  serve(port);
}
