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

/** A bare server of this folder run as its own program (`script`, built next to this file). */
export function bareTarget(name: string, label: string, script: string, args: string[] = []): TargetDef {
  return {
    name,
    label,
    start: ({ port, tmpDir }) => launchServer({
      name,
      cmd: process.execPath,
      args: [path.join(__dirname, script), '--port', String(port), ...args],
      cwd: os.tmpdir(),
      env: { PATH: process.env.PATH ?? '' },
      port,
      tmpDir,
      readyPath: '/',
      stopGraceMs: 2000,
    }),
  };
}

export const ceilingTarget: TargetDef = bareTarget('ceiling', 'ceiling (bare uWS)', 'ceiling.js');

type UWS = typeof import('uWebSockets.js');
export type CeilingSocket = import('uWebSockets.js').WebSocket<{ channels: string[] }>;

export interface CeilingHooks {
  /** socket_id of a new connection. */
  socketId(): string;
  /** A socket subscribed to ch (called before subscription_succeeded is sent). */
  subscribed?(ws: CeilingSocket, ch: string): void;
  /** A socket closed; ws.getUserData().channels lists what it had subscribed to. */
  closed?(ws: CeilingSocket): void;
  /** A publish's frame for ch, built once. */
  publish(ch: string, frame: string): void;
}

/**
 * The ceiling's routes on a new uWS App (the comment at the top of this file), shared with
 * the threaded ceiling (ceiling-threads.ts), which differs only in where a publish goes.
 */
export function ceilingApp(uWS: UWS, hooks: CeilingHooks): { app: import('uWebSockets.js').TemplatedApp; sockets: Set<CeilingSocket> } {
  const PONG = '{"event":"pusher:pong","data":"{}"}';
  const sockets = new Set<CeilingSocket>();
  const app = uWS.App();
  app.ws<{ channels: string[] }>('/app/:key', {
    compression: uWS.DISABLED,
    maxPayloadLength: 256 * 1024,
    maxBackpressure: 1024 * 1024,
    closeOnBackpressureLimit: 0,
    idleTimeout: 128,
    sendPingsAutomatically: true,
    upgrade: (res, req, ctx) => {
      res.upgrade({ channels: [] }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'), ctx);
    },
    open: (ws) => {
      sockets.add(ws);
      ws.send('{"event":"pusher:connection_established","data":' +
        JSON.stringify(JSON.stringify({ socket_id: hooks.socketId(), activity_timeout: 120 })) + '}', false);
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
        ws.getUserData().channels.push(ch);
        hooks.subscribed?.(ws, ch);
        ws.send('{"event":"pusher_internal:subscription_succeeded","channel":' + JSON.stringify(ch) + ',"data":"{}"}', false);
      } else if (m.event === 'pusher:ping') {
        ws.send(PONG, false);
      }
    },
    close: (ws) => {
      sockets.delete(ws);
      hooks.closed?.(ws);
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
        for (const ch of ev.channels) hooks.publish(ch, head + JSON.stringify(ch) + tail);
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
  return { app, sockets };
}

function serve(port: number): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const uWS = require('uWebSockets.js') as UWS;
  let nextId = 1;
  const { app, sockets } = ceilingApp(uWS, {
    socketId: () => `1.${nextId++}`,
    publish: (ch, frame) => app.publish(ch, frame, false),
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
