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

  /** Listens (again, on the same port, with the same tables). */
  async resume(): Promise<void> {
    if (this.listening) return;
    const server = this.server;
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

  /** Stops listening (connections refused until resume()); the tables stay. */
  async pause(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    const s = this.server;
    const closed = new Promise((r) => s.close(r));
    s.closeAllConnections();
    await closed;
  }

  stop(): Promise<void> {
    return this.pause();
  }
}
