// The app store of `app_manager.driver` (null for array: the apps are the configured ones).

import type { Config } from '../../config/types';
import type { AppStore } from './port';

export type { AppStore, StoredApp, TableSchema } from './port';
export { AppStoreUnavailable } from './port';
export { AppStoreRefused } from './peer-rows';

/** A store for the driver (not yet connected: open() does), loading only that driver's client. */
export function createAppStore(config: Config): AppStore | null {
  /* eslint-disable @typescript-eslint/no-require-imports -- each driver's client is loaded only when used */
  switch (config.app_manager.driver) {
    case 'postgres': return (require('./postgres') as typeof import('./postgres')).postgresStore(config);
    case 'mysql': return (require('./mysql') as typeof import('./mysql')).mysqlStore(config);
    case 'dynamodb': return new (require('./dynamodb') as typeof import('./dynamodb')).DynamoAppStore(config);
    default: return null;
  }
  /* eslint-enable @typescript-eslint/no-require-imports */
}
