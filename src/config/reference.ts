// What schema.ts publishes: config.schema.json (a JSON Schema, draft-07, for editors:
// `# yaml-language-server: $schema=./config.schema.json` in config.yaml gives completion,
// hover text and validation) and docs/configuration.md (the reference: every key, type,
// default, environment variable and effect). scripts/config-schema.mjs writes both;
// test/config/reference.test.ts fails when the committed files differ from these.

import type { TSchema } from '@sinclair/typebox';
import { AppManagerSchema, AppSchema, ChannelDeltaValue, ConfigFileSchema, GlobalSchema, WebhookSchema } from './schema';
import { RULES } from './rules';

type Node = Record<string, unknown>;

// ---- JSON Schema ----

/** config.schema.json's content. */
export function jsonSchema(): Node {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'ringcast configuration (config.yaml)',
    ...publish(ConfigFileSchema, true),
    description: 'Generated from src/config/schema.ts by scripts/config-schema.mjs; reference: docs/configuration.md.',
  };
}

/** A schema node as editors read it: no ringcast keywords, env and derived defaults in the description. */
function publish(s: Node, root = false): Node {
  const out: Node = {};
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith('x-') || (k === 'format' && String(v).startsWith('ringcast-'))) continue;
    if (k === 'default' && 'x-default-doc' in s) continue;
    if (k === 'required' && (root || s['x-section'])) continue; // a file sets only what it changes
    if (k === 'properties' || k === 'patternProperties') out[k] = mapValues(v as Record<string, Node>, (p) => publish(p));
    else if (k === 'items' || (k === 'additionalProperties' && typeof v === 'object')) out[k] = publish(v as Node);
    else if (k === 'anyOf') Object.assign(out, publishUnion(v as Node[]));
    else out[k] = v;
  }
  if (typeof out.description === 'string') out.description = describe(s);
  if (s['x-section']) out.type = ['object', 'null']; // `ssl:` with nothing under it keeps the defaults
  return out;
}

/** A union of fixed strings (and null) becomes an `enum`: editors offer each value. */
function publishUnion(anyOf: Node[]): Node {
  const nonNull = anyOf.filter((v) => v.type !== 'null');
  if (nonNull.every((v) => 'const' in v)) return { enum: [...nonNull.map((v) => v.const), ...(nonNull.length < anyOf.length ? [null] : [])] };
  return { anyOf: anyOf.map((v) => publish(v)) };
}

function mapValues<T, U>(o: Record<string, T>, f: (v: T) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));
}

/** The description with the env variable and a default that is not a plain value. */
function describe(s: Node): string {
  let d = String(s.description);
  if (typeof s['x-default-from'] === 'string') d += ` Default: the value of ${s['x-default-from']}.`;
  if (typeof s['x-default-doc'] === 'string') d += ` Default: ${s['x-default-doc']}.`;
  if (typeof s['x-env'] === 'string') d += ` Environment: ${s['x-env']}.`;
  return d;
}

// ---- docs/configuration.md ----

const HEADER = `# Configuration reference

<!-- Generated from src/config/schema.ts by \`node scripts/config-schema.mjs\` (after
\`npx tsc -p tsconfig.json\`); do not edit by hand: test/config/reference.test.ts fails
when this file or config.schema.json is not what the schema gives. How to add a key:
"Adding a key" at the end. -->

ringcast reads its configuration in layers, lowest first: built-in defaults →
\`config.yaml\` (or \`--config FILE\`) → environment variables → (tests) programmatic
overrides. A key the schema does not have is an error (with a "did you mean"), and so is a
value of the wrong type; every problem is reported at once, naming the key, the rule, the
value and where it was set; \`ringcast start\` then exits with status 78:

\`\`\`
ringcast: invalid configuration: port must be an integer between 0 and 65535, got -1 (from config.yaml)
\`\`\`

\`ringcast check-config [--config FILE]\` prints the effective configuration (secrets
masked) or every error. Editors that speak the YAML language server (VS Code's YAML
extension, JetBrains IDEs, Neovim) validate and complete \`config.yaml\` from
[config.schema.json](../config.schema.json) through the first line of the shipped file:

\`\`\`yaml
# yaml-language-server: $schema=./config.schema.json
\`\`\`

Environment variables: booleans are \`true\`/\`false\`, \`1\`/\`0\` or \`yes\`/\`no\`; lists
are comma-separated; a nullable number also takes \`null\` or \`off\`; an empty variable
counts as unset. "(ringcast)" marks a variable of ringcast's own (the others are the names
of the Pusher-compatible spec).
`;

const ADDING = `## Adding a key

Everything about a key is one entry in the schema (\`src/config/schema.ts\` composes the
sections, each kept in the file of its concern: \`server-schema.ts\`, \`backends-schema.ts\`,
\`channels-schema.ts\`, \`backend-calls-schema.ts\`, \`ops-schema.ts\`, \`app-schema.ts\`);
the loader, the defaults, the messages, the environment variable, \`config.schema.json\`
and this page follow from it.

1. Add the entry to its section (a new section: \`section({...}, 'what it is')\` in its
   concern's file, listed in \`GlobalSchema\`),
   with a builder of \`src/config/schema-kit.ts\`: \`int(default, min, { max?, doc, env?, ours? })\`,
   \`intOrNull\`, \`port\`, \`bool\`, \`str\` (non-empty), \`text\` (may be empty), \`optStr\`
   (string or null), \`oneOf([...], default, doc)\`, \`strList\`, \`hostPorts\`, \`fileMode\`.
   \`doc\` is the description shown here and in editors; \`env\` the environment variable
   (the spec's name when it has one; \`ours: true\` otherwise); \`rule\` only when the
   derived message (\`must be a positive integer\`, \`must be one of a, b\`) would not say enough.
   Example: \`max_items: int(100, 1, { doc: 'Messages kept per channel.', env: 'HISTORY_MAX_ITEMS', ours: true })\`.
2. A per-app key goes in \`AppSchema\` (\`app-schema.ts\`), wrapped in \`Type.Optional(...)\`, with a \`default\`
   (\`Type.Optional(bool(false, { doc }))\`) or \`limit('section.global_key', doc)\` to default
   to a global key. The \`Config\` / \`AppConfig\` types follow; read it as
   \`config.section.max_items\` or \`app.max_items\`.
3. A rule across keys (\`a ≤ b\`, "needs x.enabled") goes in \`src/config/rules.ts\`
   (\`globalRules\`, each guarded by \`c.ok(...)\`), with its one-line statement in \`RULES\`.
4. Claim the key's effect in \`test/ops/option-claims.ts\`, pin its messages in
   \`test/config/config.test.ts\`, add it to \`config.yaml\` when users should see it, then
   \`npx tsc -p tsconfig.json && node scripts/config-schema.mjs\` and commit the two
   generated files.
`;

/** docs/configuration.md's content. */
export function markdownReference(): string {
  const parts = [HEADER];
  const top = Object.entries(GlobalSchema.properties as Record<string, Node>).filter(([, p]) => !p['x-section']);
  parts.push(`## Server\n\n${table(top.map(([k, p]) => row(k, p)))}`);
  for (const [k, p] of Object.entries(GlobalSchema.properties as Record<string, Node>)) {
    if (p['x-section']) parts.push(...sectionDoc(k, p, 2));
  }
  parts.push(`## Apps (\`apps[]\`)\n\nApps are listed under \`apps\` and/or \`app_manager.array.apps\` (both lists are used), plus one default app from \`SERVICE_DEFAULT_APP_ID\`, \`_KEY\` and \`_SECRET\` (all three, or none), which replaces an app with the same id. Ids and keys must be unique. Only \`id\`, \`key\` and \`secret\` are required; a limit an app leaves out takes the global key's value.\n\n${objectTable('', AppSchema)}`);
  parts.push(`### Webhook (\`apps[].webhooks[]\`)\n\n${objectTable('', WebhookSchema)}`);
  const deltaObject = (ChannelDeltaValue.anyOf as Node[]).find((v) => v.type === 'object') as Node;
  parts.push(`### Channel delta setting (\`apps[].channel_delta_compression.<pattern>\`)\n\nThe pattern is an exact channel name, \`prefix-*\`, \`*-suffix\` or \`*\`. The setting is \`Fossil\`, \`Xdelta3\`, \`disabled\`, \`inherit\`, or a mapping:\n\n${objectTable('', deltaObject)}`);
  parts.push(...sectionDoc('app_manager', AppManagerSchema, 2));
  parts.push(`## Rules across keys\n\nChecked after each key's own rule, on valid values:\n\n${RULES.map((r) => `- ${r}`).join('\n')}\n`);
  parts.push(ADDING);
  return parts.join('\n');
}

function sectionDoc(path: string, s: Node, level: number): string[] {
  const props = Object.entries(s.properties as Record<string, Node>);
  const leaves = props.filter(([, p]) => !p['x-section']).map(([k, p]) => row(`${path}.${k}`, p));
  const out = [`${'#'.repeat(Math.min(level, 3))} \`${path}\`\n\n${String(s.description)}\n\n${leaves.length > 0 ? table(leaves) : ''}`];
  for (const [k, p] of props) if (p['x-section']) out.push(...sectionDoc(`${path}.${k}`, p, level + 1));
  return out;
}

function objectTable(prefix: string, s: Node): string {
  return table(Object.entries(s.properties as Record<string, Node>).map(([k, p]) => row(prefix + k, p, (s.required as string[] | undefined)?.includes(k))));
}

function table(rows: string[]): string {
  return `| key | type | default | env | effect |\n|---|---|---|---|---|\n${rows.join('\n')}\n`;
}

function row(key: string, s: Node, required = false): string {
  const env = typeof s['x-env'] === 'string' ? `\`${s['x-env']}\`${s['x-env-ours'] ? ' (ringcast)' : ''}` : '–';
  const cells = [`\`${key}\``, typeText(s), required ? 'required' : defaultText(s), env, typeof s.description === 'string' ? s.description : ''];
  return `| ${cells.map((c) => c.replace(/\|/g, '\\|').replace(/\n/g, ' ')).join(' | ')} |`;
}

/** The type in words. */
export function typeText(s: Node): string {
  if (s['x-env-kind'] === 'mode') return 'file mode (octal)';
  const anyOf = s.anyOf as Node[] | undefined;
  if (anyOf) {
    const nonNull = anyOf.filter((v) => v.type !== 'null');
    const orNull = nonNull.length < anyOf.length ? ' or null' : '';
    if (nonNull.every((v) => 'const' in v)) return nonNull.map((v) => `\`${String(v.const)}\``).join(', ') + orNull;
    if (nonNull.some((v) => v.type === 'string') && nonNull.some((v) => v.type === 'object')) return '"host:port" or {host, port}';
    return nonNull.map((v) => typeText(v)).filter((t, i, a) => a.indexOf(t) === i).join(' or ') + orNull;
  }
  if ('const' in s) return `\`${String(s.const)}\``;
  switch (s.type) {
    case 'integer': {
      const lo = s.minimum as number | undefined;
      const hi = s.maximum as number | undefined;
      if (lo === undefined) return 'integer';
      return hi !== undefined ? `integer ${lo}–${hi}` : `integer ≥ ${lo}`;
    }
    case 'number': {
      const lo = s.minimum as number | undefined;
      const hi = s.maximum as number | undefined;
      return lo !== undefined && hi !== undefined ? `number ${lo}–${hi}` : 'number';
    }
    case 'boolean': return 'boolean';
    case 'string': return s.pattern === '\\S' || s.minLength === 1 ? 'non-empty string' : 'string';
    case 'array': {
      const items = s.items as Node;
      if (items.type === 'object') return 'list of mappings';
      return `list of ${typeText(items).replace(/string$/, 'strings')}`;
    }
    default: return 'mapping';
  }
}

function defaultText(s: Node): string {
  if (typeof s['x-default-doc'] === 'string') return s['x-default-doc'];
  if (typeof s['x-default-from'] === 'string') return `\`${s['x-default-from']}\``;
  if (!('default' in s)) return '–';
  const d = s.default;
  return `\`${typeof d === 'string' ? (d === '' ? '""' : d) : JSON.stringify(d)}\``;
}

/** For tests: the leaves of the global schema with their descriptions (every key documented). */
export function undocumented(schema: TSchema = GlobalSchema, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, p] of Object.entries((schema as unknown as Node).properties as Record<string, Node>)) {
    if (typeof p.description !== 'string' || p.description === '') out.push(prefix + k);
    if (p['x-section']) out.push(...undocumented(p as unknown as TSchema, `${prefix}${k}.`));
  }
  return out;
}

/** Repository path → content of every generated file. */
export function generatedFiles(): Record<string, string> {
  return {
    'config.schema.json': JSON.stringify(jsonSchema(), null, 2) + '\n',
    'docs/configuration.md': markdownReference(),
  };
}
