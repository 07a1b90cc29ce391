// Import boundaries of src/ (README, "Tests": the layering), checked by
// scripts/check-boundaries.mjs in `make test` and `make lint`. Paths are resolved files,
// so `../shard/fanout` and `./shard/init` are the same folder whoever imports them, and
// `import type` (or `import { type X }` on every name) counts as type-only.
//
// - protocol/, bus/, config/ and filter/ are the pure core: they import nothing of ours
//   outside those four folders, and from each other only types.
// - every other folder sits in a layer (LAYERS) and imports only downwards; no import cycle,
//   type-only ones included. Tests and benchmarks are not checked here.

const CORE = '^src/(protocol|bus|config|filter)/';

// Every file of src/ sits in one layer (docs/architecture.md, "Source layout"); a file
// imports only from its own layer's folders or from layers below it. A folder that is in
// no layer fails the check, so a new folder must be placed before it can land.
const LAYERS = [
  ['main.ts', 'cli.ts', 'check-config.ts', 'import/'],
  ['primary/'],
  ['shard/'],
  ['reload/'],
  ['fallback/'],
  ['ws/', 'http/'],
  ['hooks/'],
  ['history/'],
  ['console/'],
  ['webhooks/'],
  ['delta/'],
  ['adapter/'],
  ['channels/'],
  ['ratelimit/'],
  ['metrics/'],
  ['listeners/'],
  ['redis/'],
  ['apps/'],
  ['limits/'],
  ['tracing/'],
  ['log.ts', 'thread-name.ts', 'runtime.ts'],
  ['protocol/', 'bus/', 'config/', 'filter/'],
];
const esc = (s) => s.replace(/\./g, '\\.');
const pathOf = (layer) => `^src/(${layer.map((f) => esc(f) + (f.endsWith('/') ? '' : '$')).join('|')})`;

// (the core, the last layer, has the stricter rules below)
const layerRules = LAYERS.slice(1, -1).map((layer, i) => ({
  name: 'imports-go-down',
  comment: `${layer.join(', ')} import nothing from the layers above them`,
  severity: 'error',
  from: { path: pathOf(layer) },
  to: { path: pathOf(LAYERS.slice(0, i + 1).flat()) },
}));

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
    ...layerRules,
    {
      name: 'every-folder-has-a-layer',
      comment: 'a file of src/ outside every layer of .dependency-cruiser.cjs: add its folder to LAYERS',
      severity: 'error',
      from: { path: '^src/', pathNot: pathOf(LAYERS.flat()) },
      to: {},
    },
    {
      name: 'no-circular',
      comment: 'no import cycle, type-only ones included',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // see imports before tsc erases the type-only ones
    tsPreCompilationDeps: true,
  },
};
