// `ringcast import soketi|sockudo FILE [--output FILE]`: a peer's configuration as a
// ringcast config file. The YAML goes to stdout (or --output), and every setting that has
// no equivalent, or that ringcast refuses, is listed on stderr. The result is loaded as
// `ringcast start` would load it before it is written, so it always passes check-config.

import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { stringify } from 'yaml';
import { AppSchema } from '../config/schema';
import { fromSockudo } from './sockudo';
import { fromSoketi, parseEnvFile, soketiOptionsFromEnv } from './soketi';
import { isTree, pruneToValid, type Tree } from './tree';

export const IMPORT_USAGE = `  ringcast import soketi FILE [--output FILE]
                                   convert soketi's config.json (or its SOKETI_* env file)
  ringcast import sockudo FILE [--output FILE]
                                   convert sockudo's config.toml (or config.json)`;

export interface Imported {
  yaml: string;
  notes: string[];
}

function parseObject(text: string, what: string): Tree {
  const v = JSON.parse(text) as unknown;
  if (!isTree(v)) throw new Error(`${what} must hold a JSON object`);
  return v;
}

/** Converts the text of a peer's config file; throws with a message naming the file on bad input. */
export function importText(peer: 'soketi' | 'sockudo', file: string, text: string): Imported {
  const notes: string[] = [];
  let tree: Tree;
  try {
    if (peer === 'soketi') {
      tree = file.endsWith('.json') || /^[[{]/.test(text.trimStart())
        ? fromSoketi(parseObject(text, file), notes)
        : fromSoketi(soketiOptionsFromEnv(parseEnvFile(text), notes), notes);
    } else {
      const opts = file.endsWith('.json') || text.trimStart().startsWith('{') ? parseObject(text, file) : parseToml(text) as Tree;
      tree = fromSockudo(opts, new Set(Object.keys(AppSchema.properties)), notes);
    }
  } catch (err) {
    throw new Error(`cannot read ${peer}'s configuration in ${file}: ${(err as Error).message.split('\n')[0]}`);
  }
  notes.push(...pruneToValid(tree));
  if (!Array.isArray(tree.apps) || tree.apps.length === 0) {
    notes.push('apps: none carried over; add your apps (id, key, secret) before starting ringcast');
  }
  const header = `# yaml-language-server: $schema=./config.schema.json\n# ringcast configuration converted from ${peer}'s ${file.split('/').pop()}.\n# Settings that did not carry over were listed by \`ringcast import\`; every other key keeps its default\n# (see config.yaml for all of them).\n`;
  return { yaml: header + stringify(tree), notes };
}

/** The CLI command; returns the exit status (0, 2 bad usage, 1 unreadable or unconvertible input). */
export function runImport(args: string[], out: (s: string) => void, err: (s: string) => void): number {
  const peer = args.shift();
  if (peer !== 'soketi' && peer !== 'sockudo') {
    err(`ringcast import: ${peer === undefined ? 'missing' : `unknown server "${peer}"`}: say soketi or sockudo\n\nUsage:\n${IMPORT_USAGE}\n`);
    return 2;
  }
  let file: string | undefined;
  let output: string | undefined;
  while (args.length > 0) {
    const a = args.shift() as string;
    if (a === '--output' || a === '-o') {
      output = args.shift();
      if (!output) {
        err('ringcast import: --output needs a file path\n');
        return 2;
      }
    } else if (a.startsWith('-')) {
      err(`ringcast import: unknown option "${a}"\n`);
      return 2;
    } else if (file === undefined) file = a;
    else {
      err(`ringcast import: one input file only (got "${file}" and "${a}")\n`);
      return 2;
    }
  }
  if (file === undefined) {
    err(`ringcast import ${peer}: missing the input file\n\nUsage:\n${IMPORT_USAGE}\n`);
    return 2;
  }
  let result: Imported;
  try {
    result = importText(peer, file, readFileSync(file, 'utf8'));
  } catch (e) {
    err(`ringcast import: ${(e as Error).message}\n`);
    return 1;
  }
  for (const n of result.notes) err(`ringcast import: ${n}\n`);
  if (output) writeFileSync(output, result.yaml);
  else out(result.yaml);
  return 0;
}
