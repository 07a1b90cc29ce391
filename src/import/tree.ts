// What both importers share: plain-object trees addressed by dotted paths, and the check
// that turns a candidate ringcast tree into one that loads: every value ringcast refuses
// is taken out and named, so the written file always passes `ringcast check-config`.

import { ConfigError, loadConfig } from '../config';
import { defaultRawTree } from '../config/defaults';
import { unsupportedIssues } from '../config/support';

export type Tree = Record<string, unknown>;

export function isTree(v: unknown): v is Tree {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
}

/** A value as a note shows it (JSON for anything that is not a string). */
export function show(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** The value at a dotted path, or undefined. */
export function getPath(t: Tree, path: string): unknown {
  let cur: unknown = t;
  for (const p of path.split('.')) {
    if (!isTree(cur) && !Array.isArray(cur)) return undefined;
    cur = (cur as Tree)[p];
  }
  return cur;
}

/** Sets a dotted path, making sections (or arrays, for a numeric part) on the way. */
export function setPath(t: Tree, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur: Tree = t;
  parts.forEach((p, i) => {
    if (i === parts.length - 1) {
      cur[p] = value;
      return;
    }
    if (!isTree(cur[p]) && !Array.isArray(cur[p])) cur[p] = /^\d+$/.test(parts[i + 1]) ? [] : {};
    cur = cur[p] as Tree;
  });
}

/** Removes a dotted path; emptied sections stay (they are harmless). */
export function deletePath(t: Tree, path: string): void {
  const parts = path.split('.');
  const last = parts.pop() as string;
  const parent = parts.length === 0 ? t : getPath(t, parts.join('.'));
  if (Array.isArray(parent) && /^\d+$/.test(last)) parent[Number(last)] = undefined; // pruneToValid compacts the apps
  else if (isTree(parent)) delete parent[last];
}

/** A tree whose keys may be dotted (`"appManager.array.apps": [...]`) as nested sections. */
export function expandDotted(src: Tree): Tree {
  const out: Tree = {};
  for (const [k, v] of Object.entries(src)) {
    const value = isTree(v) ? expandDotted(v) : v;
    const prev = getPath(out, k);
    if (isTree(prev) && isTree(value)) Object.assign(prev, value);
    else setPath(out, k, value);
  }
  return out;
}

/** Every leaf path of a tree (arrays are leaves). */
export function leafPaths(t: Tree, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(t)) {
    if (isTree(v) && Object.keys(v).length > 0) out.push(...leafPaths(v, `${prefix}${k}.`));
    else out.push(prefix + k);
  }
  return out;
}

/** Whether ringcast's config file has this dotted key (a leaf or a section). */
export function ringcastHas(path: string): boolean {
  return getPath(defaultRawTree(), path) !== undefined;
}

/** `apps[2].max_connections` (a ConfigError key) as a dotted path: `apps.2.max_connections`. */
function dotted(key: string): string {
  return key.replace(/\[(\d+)\]/g, '.$1').replace(/^app_manager\.array\.apps/, 'apps');
}

/** A ConfigError message without its "(from overrides)" origin, which means nothing here. */
function plain(message: string): string {
  return message.replace(/ \(from overrides\)/g, '');
}

const APP_IDENTITY = /^apps\.(\d+)\.(id|key|secret)$/;

/**
 * Loads `tree` as ringcast would; while it is refused, takes out each refused key (an app
 * without a usable id, key or secret goes whole) and notes why. Returns the notes.
 */
export function pruneToValid(tree: Tree): string[] {
  const notes: string[] = [];
  for (let round = 0; round < 50; round++) {
    let issues: readonly { key: string; message: string }[];
    try {
      const config = loadConfig({ env: {}, overrides: tree });
      issues = unsupportedIssues(config);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      issues = err.issues;
    }
    // A file the config names (TLS certificate, CA) need not exist where the import runs.
    const missingFiles = issues.filter((i) => /readable .*file.*\(E[A-Z]+\)/.test(i.message));
    // No apps is said by the caller (the apps may come from elsewhere).
    issues = issues.filter((i) => !missingFiles.includes(i) && !(i.key === 'apps' && /no apps configured/.test(i.message)));
    if (issues.length === 0) {
      for (const i of missingFiles) notes.push(`${dotted(i.key)}: kept, but the file must exist where ringcast runs: ${plain(i.message)}`);
      return notes;
    }
    const before = JSON.stringify(tree);
    const removed = new Set<string>();
    for (const issue of issues) {
      let path = dotted(issue.key);
      const id = APP_IDENTITY.exec(path);
      if (id) path = `apps.${id[1]}`;
      const hook = /^apps\.\d+\.webhooks\.\d+/.exec(path);
      if (hook) path = hook[0]; // a webhook that cannot be sent goes whole
      const said = (p: string) => [...removed].some((r) => p === r || p.startsWith(r + '.'));
      if (said(path)) continue;
      // A rule across keys may name one the tree does not set (a default): its section goes.
      while (getPath(tree, path) === undefined && path.includes('.')) path = path.slice(0, path.lastIndexOf('.'));
      if (said(path)) continue;
      removed.add(path);
      notes.push(`${path}: left out, ringcast refuses it: ${plain(issue.message)}`);
      deletePath(tree, path);
    }
    if (Array.isArray(tree.apps)) {
      const apps = (tree.apps as unknown[]).filter((a) => a !== undefined);
      for (const app of apps) if (isTree(app) && Array.isArray(app.webhooks)) app.webhooks = (app.webhooks as unknown[]).filter((w) => w !== undefined);
      tree.apps = apps;
    }
    if (JSON.stringify(tree) === before) {
      throw new ConfigError(issues[0].key, `the imported configuration does not load: ${issues[0].message}`);
    }
  }
  throw new ConfigError('import', 'the imported configuration does not load');
}
