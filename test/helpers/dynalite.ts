// A local DynamoDB-compatible server for tests: dynalite (pure JS, in memory) in this
// process, on a free port of 127.0.0.1, reached through the AWS SDK's endpoint option.

import type { Server } from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const dynalite = require('dynalite') as (opts: Record<string, unknown>) => Server;

/** Credentials dynalite accepts (any); ringcast takes them from the environment as the SDK does. */
export const DYNAMO_ENV = { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' };

export class DynaliteServer {
  private readonly server: Server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  private listening = false;
  private paused = false;
  private constructor(public port: number) {}

  static async start(): Promise<DynaliteServer> {
    const s = new DynaliteServer(0);
    await s.resume();
    return s;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  client(): DynamoDBClient {
    return new DynamoDBClient({ region: 'us-east-1', endpoint: this.url, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  }

  /** Listens, or after pause() takes connections again (the same port and tables). */
  async resume(): Promise<void> {
    if (this.listening) {
      this.paused = false;
      return;
    }
    const server = this.server;
    // dynalite drops its tables when its server closes: a pause cuts connections instead
    server.prependListener('connection', (socket) => {
      if (this.paused) socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as { port: number }).port;
    this.listening = true;
  }

  /** Every connection is cut (open ones now, new ones at once) until resume(); the tables stay. */
  pause(): Promise<void> {
    this.paused = true;
    this.server.closeAllConnections();
    return Promise.resolve();
  }

  async stopServer(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    const s = this.server;
    const closed = new Promise((r) => s.close(r));
    s.closeAllConnections();
    await closed;
  }

  stop(): Promise<void> {
    return this.stopServer();
  }
}
