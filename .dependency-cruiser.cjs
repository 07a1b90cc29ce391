// Import boundaries of src/ (README, "Tests": the layering), checked by
// scripts/check-boundaries.mjs in `make test` and `make lint`. Paths are resolved files,
// so `../shard/fanout` and `./shard/init` are the same folder whoever imports them, and
// `import type` (or `import { type X }` on every name) counts as type-only.
//
// - protocol/, bus/, config/ and filter/ are the pure core: they import nothing of ours
//   outside those four folders, and from each other only types.
// - primary/, shard/ and main.ts are the wiring: only main.ts, cli.ts, primary/ and shard/ import
//   them (tests and benchmarks may; they are not checked here).

const CORE = '^src/(protocol|bus|config|filter)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'core-imports-only-core',
      comment: 'protocol/, bus/, config/ and filter/ import nothing of ours outside those four folders',
      severity: 'error',
      from: { path: CORE },
      to: { path: '^src/', pathNot: CORE },
    },
    {
      name: 'core-shares-only-types',
      comment: 'between two of protocol/, bus/, config/ and filter/ only type-only imports',
      severity: 'error',
      from: { path: CORE },
      // $1: the importing file's own folder, where value imports are fine
      to: { path: CORE, pathNot: '^src/$1/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'nothing-imports-the-wiring',
      comment: 'only main.ts, cli.ts, primary/ and shard/ import shard/ or main.ts',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(main\\.ts|cli\\.ts|primary/|shard/)' },
      to: { path: '^src/(shard/|main\\.ts$)' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // see imports before tsc erases the type-only ones
    tsPreCompilationDeps: true,
  },
};
