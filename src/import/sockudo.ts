// sockudo's options (config.toml or config.json) → a ringcast config tree. ringcast's
// config keys follow sockudo's, so most keys carry over as they are; the rest are renamed
// here or named as having no equivalent.

import { getPath, isTree, leafPaths, ringcastHas, setPath, show, type Tree } from './tree';

/** sockudo key → ringcast key, where the names differ. */
const RENAMED: Record<string, string> = {
  'http_api.request_limit_in_mb': 'http.request_limit_in_mb',
  'logging.colors_enabled': 'log.colors_enabled',
  'logging.include_target': 'log.include_target',
  'metrics.prometheus.prefix': 'metrics.prefix',
  websocket_max_payload_kb: 'websocket.max_payload_kb',
  activity_timeout: 'websocket.activity_timeout',
  'webhooks.request_timeout_ms': 'webhooks.timeout_ms',
};

/** App fields sockudo keeps under `policy` (5.x) as well as flat. */
const POLICY_PARTS = ['limits', 'features', 'channels'];
const APP_RENAMED: Record<string, string> = { max_read_requests_per_second: '' };

/** Keys read by hand below. */
const HANDLED = ['debug', 'shutdown_grace_period', 'user_authentication_timeout', 'app_manager', 'queue.driver', 'mode', 'path_prefix'];

function appFrom(src: Tree, index: number, appKeys: Set<string>, notes: string[]): Tree {
  const flat: Tree = {};
  for (const [k, v] of Object.entries(src)) {
    if (k === 'policy' && isTree(v)) {
      for (const [part, body] of Object.entries(v)) {
        if (POLICY_PARTS.includes(part) && isTree(body)) Object.assign(flat, body);
        else notes.push(`app_manager.array.apps.${index}.policy.${part}: no equivalent; left out`);
      }
    } else flat[k] = v;
  }
  const app: Tree = {};
  for (const [k, v] of Object.entries(flat)) {
    if (appKeys.has(k) && APP_RENAMED[k] === undefined) app[k] = v;
    else notes.push(`app_manager.array.apps.${index}.${k}: no equivalent${k.startsWith('max_read') ? ' (ringcast has no per-app limit on HTTP API reads; rate_limiter.api limits them per address)' : ''}; left out`);
  }
  return app;
}

/** sockudo options → a ringcast config tree; what does not carry over goes to `notes`. */
export function fromSockudo(o: Tree, appKeys: Set<string>, notes: string[]): Tree {
  const out: Tree = {};
  const unknownSections = new Set<string>();
  for (const path of leafPaths(o)) {
    if (HANDLED.some((h) => path === h || path.startsWith(h + '.'))) continue;
    const v = getPath(o, path);
    const to = RENAMED[path] ?? path;
    if (ringcastHas(to)) {
      setPath(out, to, v);
      continue;
    }
    // A whole section ringcast lacks is named once.
    const top = path.split('.')[0];
    if (!ringcastHas(top)) unknownSections.add(top);
    else if (path.split('.').length > 2 && !ringcastHas(path.split('.').slice(0, 2).join('.'))) unknownSections.add(path.split('.').slice(0, 2).join('.'));
    else notes.push(`${path}: no equivalent in ringcast; left out`);
  }
  for (const s of unknownSections) notes.push(`${s}: section has no equivalent in ringcast; left out`);

  if (o.debug === true) setPath(out, 'log.level', 'debug');
  if (typeof o.shutdown_grace_period === 'number') out.shutdown_grace_period = o.shutdown_grace_period * 1000; // sockudo: s, ringcast: ms
  if (o.mode !== undefined) notes.push(`mode: no equivalent (one ringcast process runs every part); left out`);
  if (o.path_prefix !== undefined && o.path_prefix !== '/' && o.path_prefix !== '') notes.push('path_prefix: no equivalent; serve ringcast under a prefix with the load balancer');
  const queue = getPath(o, 'queue.driver');
  if (queue === 'memory' || queue === 'sync' || queue === 'none') setPath(out, 'queue.driver', 'sync');
  else if (queue === 'redis') setPath(out, 'queue.driver', 'redis');
  else if (queue !== undefined) notes.push(`queue.driver: ${show(queue)} has no equivalent; webhooks are queued in memory (sync) or in redis`);

  const driver = getPath(o, 'app_manager.driver');
  if (driver !== undefined && driver !== 'memory' && driver !== 'array') {
    notes.push(`app_manager.driver: ${show(driver)}: this file holds no database app store settings; keep the applications table and point ringcast's app store at it, or list the apps here`);
  }
  for (const part of ['cache']) {
    if (getPath(o, `app_manager.${part}`) !== undefined) notes.push(`app_manager.${part}: no equivalent with apps from this file; left out`);
  }
  const apps = getPath(o, 'app_manager.array.apps');
  if (Array.isArray(apps)) {
    const timeout = o.user_authentication_timeout;
    out.apps = apps.filter(isTree).map((a, i) => {
      const app = appFrom(a, i, appKeys, notes);
      if (typeof timeout === 'number' && app.user_authentication_timeout === undefined) app.user_authentication_timeout = timeout;
      return app;
    });
  }
  return out;
}
