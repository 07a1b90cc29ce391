// ringcast's client for its protocol extensions: wraps a pusher-js instance (created by
// the application, any options) and adds what plain pusher-js cannot ask for. Each
// extension lives in its own file (filter.js: tag filters) and hooks the instance once.
//
//   import Pusher from 'pusher-js';
//   import { ringcast, Filter } from 'ringcast/client';
//   const client = ringcast(new Pusher(key, { wsHost, wsPort, forceTLS: false, cluster: 'mt1' }));
//   client.subscribe('prices', { filter: Filter.eq('region', 'eu') }).bind('price', cb);

import { filtersOf, subscribeFiltered, unsubscribeFiltered } from './filter.js';

export { Filter } from './filter.js';
export { withRecovery } from './recovery.js';

/**
 * @param {import('pusher-js').default} pusher
 */
export function ringcast(pusher) {
  filtersOf(pusher);
  return {
    pusher,
    /**
     * pusher.subscribe with ringcast's subscription options.
     * @param {string} channelName
     * @param {{ filter?: object | null }} [options]
     */
    subscribe(channelName, options = {}) {
      return subscribeFiltered(pusher, channelName, options.filter);
    },
    /** pusher.unsubscribe, forgetting the channel's options. */
    unsubscribe(channelName) {
      unsubscribeFiltered(pusher, channelName);
    },
  };
}
