// What the examples share: their command lines, and how their HTTP servers start and stop.

import type http from 'node:http';

/** The value after `--name` on the command line, if any. */
export function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/**
 * Runs an example against the ringcast at --host / --port (default 127.0.0.1:6001):
 * exits 0 when it ends, 1 with its error's message when it fails.
 */
export function runAgainstRingcast(name: string, run: (opts: { host: string; port: number }) => Promise<unknown>): void {
  run({ host: arg('host') ?? '127.0.0.1', port: Number(arg('port') ?? 6001) }).then(
    () => process.exit(0),
    (err: Error) => {
      console.error(`${name}: ${err.message}`);
      process.exit(1);
    },
  );
}

/** Starts `server` on `port` (0: any free port); resolves with the port and a close that ends open connections too. */
export async function listen(server: http.Server, port: number, host?: string): Promise<{ port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
