// What the examples' command lines share.

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
