// The configuration's published forms, generated from src/config/schema.ts: the JSON
// Schema editors use (config.schema.json) and the reference (docs/configuration.md) are
// committed as the schema gives them, name every key, default and env variable, and the
// shipped config.yaml points editors at the schema.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { defaultRawTree } from '../../src/config/defaults';
import { APP_ENV_VARS, ENV_VARS } from '../../src/config/env';
import { generatedFiles, jsonSchema, markdownReference, undocumented } from '../../src/config/reference';
import { AppSchema } from '../../src/config/app-schema';

const ROOT = path.resolve(__dirname, '..', '..', '..');
type Node = Record<string, any>;

t.test('the committed files are what the schema gives (node scripts/config-schema.mjs)', async (t) => {
  for (const [file, text] of Object.entries(generatedFiles())) {
    t.equal(readFileSync(path.join(ROOT, file), 'utf8'), text, `${file} is up to date: run npx tsc -p tsconfig.json && node scripts/config-schema.mjs`);
  }
});

t.test('every key has a description', async (t) => {
  t.same(undocumented(), [], 'global keys');
  t.same(Object.entries(AppSchema.properties).filter(([, p]) => !(p as Node).description).map(([k]) => k), [], 'app keys');
});

function leaves(o: unknown, prefix: string[], out: string[][]): string[][] {
  if (o !== null && typeof o === 'object' && !Array.isArray(o) && Object.keys(o).length > 0) {
    for (const [k, v] of Object.entries(o)) leaves(v, [...prefix, k], out);
  } else {
    out.push(prefix);
  }
  return out;
}

t.test('config.schema.json: every key with its default, type and env variable', async (t) => {
  const schema = jsonSchema() as Node;
  t.equal(schema.$schema, 'http://json-schema.org/draft-07/schema#');
  const tree = defaultRawTree();
  const envOf = new Map(Object.entries(ENV_VARS).map(([name, [p]]) => [p, name]));
  for (const p of leaves(tree, [], [])) {
    let node: Node | undefined = schema;
    for (const k of p) node = node?.properties?.[k];
    const key = p.join('.');
    if (!node) { t.fail(`${key} is in the JSON Schema`); continue; }
    t.ok(node.type || node.enum || node.anyOf, `${key} has a type`);
    const want = p.reduce<any>((o, k) => o[k], tree);
    if (key === 'workers' || key === 'unix_socket.permission_mode' || key === 'limits.max_connections') t.match(node.description, /Default: /, `${key}: its default is described`);
    else t.same(node.default, want, `${key}: default`);
    const env = envOf.get(key);
    if (env) t.match(node.description, `Environment: ${env}.`, `${key}: ${env} in its description`);
    for (const k of Object.keys(node)) t.notOk(k.startsWith('x-'), `${key}: no ringcast keyword ${k}`);
  }
  t.same(schema.properties.adapter.properties.driver.enum, ['local', 'redis', 'redis-cluster', 'nats'], 'a fixed choice is an enum');
  t.same(schema.properties.unix_socket.type, ['object', 'null'], 'an empty section is allowed');
  t.notOk('required' in schema.properties.ssl, 'a file sets only what it changes');
  const app = schema.properties.apps.anyOf[0].items;
  t.same(app.required, ['id', 'key', 'secret']);
  t.equal(app.additionalProperties, false, 'a mistyped app key is flagged');
  t.match(app.properties.max_event_payload_in_kb.description, 'Default: the value of event_limits.max_payload_in_kb.');
});

t.test('docs/configuration.md: every key and env variable', async (t) => {
  const md = markdownReference();
  for (const p of leaves(defaultRawTree(), [], [])) {
    const key = p.join('.');
    if (key !== 'apps') t.match(md, `| \`${key}\` |`, `${key} has a row`);
  }
  for (const k of Object.keys(AppSchema.properties)) t.match(md, `| \`${k}\` |`, `apps[].${k} has a row`);
  for (const name of [...Object.keys(ENV_VARS), ...Object.keys(APP_ENV_VARS)]) t.match(md, `\`${name}\``, `${name} is named`);
  t.match(md, '## Adding a key', 'says how to add a key');
});

t.test('the shipped config.yaml points editors at the schema', async (t) => {
  const first = readFileSync(path.join(ROOT, 'config.yaml'), 'utf8').split('\n')[0];
  t.equal(first, '# yaml-language-server: $schema=./config.schema.json');
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
  t.ok(pkg.files.includes('config.schema.json'), 'and the package ships it next to config.yaml');
});
