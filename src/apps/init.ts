// `ringcast app-store init`: creates ringcast's own apps table (id, key, secret, enabled,
// options) in the database of app_manager.driver. ringcast never creates it on its own.

import { ConfigError, loadConfig } from '../config';
import { createAppStore } from './store';

/** Exit status: 0 created, 1 the database refused (e.g. the table exists), 78 bad configuration or driver array. */
export async function initAppStore(file: string | null, env: NodeJS.ProcessEnv, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  let config;
  try {
    config = loadConfig({ file, env });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err(`ringcast: invalid configuration: ${e.message}\n`);
    return 78;
  }
  const store = createAppStore(config);
  if (!store) {
    err('ringcast: app-store init needs app_manager.driver postgres, mysql or dynamodb (with array the apps are the configuration file)\n');
    return 78;
  }
  try {
    await store.init();
    out(`created ringcast's apps table: ${store.name}\n`);
    return 0;
  } catch (e) {
    err(`ringcast: could not create the apps table: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await store.close();
  }
}
