// What ringcast runs on. Its network engine, uWebSockets.js, is the build that installs
// from the npm registry for Node 20 (v20.30, aliased as `uWebSockets.js`): one native
// binary per Node ABI, built against glibc 2.36. On another Node major, or a libc older
// than that (or musl), loading it fails with a dlopen error that names neither; this
// check runs first (bin/ringcast.js) and says what is needed instead.

export const NODE_MAJOR = 20;
export const GLIBC_MIN: readonly [number, number] = [2, 36];

export interface RuntimeFacts {
  /** process.versions.node */
  node: string;
  /** glibc's version at run time ("2.36"); undefined on musl or another libc. */
  glibc: string | undefined;
  platform: string;
  arch: string;
}

export function currentRuntime(): RuntimeFacts {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return { node: process.versions.node, glibc: header?.glibcVersionRuntime, platform: process.platform, arch: process.arch };
}

/** Why this runtime cannot run ringcast, or null when it can. */
export function runtimeProblem(r: RuntimeFacts = currentRuntime()): string | null {
  const major = Number(r.node.split('.')[0]);
  const see = 'see docs/operations.md, "Node and the WebSocket engine"';
  if (major !== NODE_MAJOR) {
    return `needs Node ${NODE_MAJOR} (this is Node ${r.node}): its WebSocket engine, uWebSockets.js v20.30 as installed from npm, ships native code for Node ${NODE_MAJOR} only; ${see}`;
  }
  if (r.platform !== 'linux' || r.arch !== 'x64') return null; // uWS ships other builds for these; its own loader reports
  if (r.glibc === undefined) {
    return `needs glibc ${GLIBC_MIN.join('.')} or newer (no glibc found: musl-based systems such as Alpine cannot load uWebSockets.js's native code); ${see}`;
  }
  const [maj, min] = r.glibc.split('.').map(Number);
  if (maj < GLIBC_MIN[0] || (maj === GLIBC_MIN[0] && min < GLIBC_MIN[1])) {
    return `needs glibc ${GLIBC_MIN.join('.')} or newer (this system has ${r.glibc}): uWebSockets.js's native code is built against it; ${see}`;
  }
  return null;
}
