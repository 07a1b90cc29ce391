// Tag filters for pusher-js (ringcast's "Tag filtering" extension, docs/protocol.md): a
// subscription's `filter` travels in its pusher:subscribe data. pusher-js builds that
// frame itself (Channel#subscribe → pusher.send_event), so the instance's send_event is
// wrapped once to add the filter registered for the channel. pusher-js resubscribes
// every channel after a reconnect through the same call: the filter goes along again.
//
// A filter is checked by the server at subscribe (a bad one answers the channel's
// pusher:subscription_error with type "InvalidFilter"); here only its shape as an object.

const installed = new WeakMap();

/**
 * Hooks `pusher` (a pusher-js instance) once; returns the registry of filters by channel.
 * @param {import('pusher-js').default} pusher
 * @returns {Map<string, object>}
 */
export function filtersOf(pusher) {
  let filters = installed.get(pusher);
  if (filters) return filters;
  filters = new Map();
  installed.set(pusher, filters);
  const send = pusher.send_event.bind(pusher);
  pusher.send_event = (event, data, channel) => {
    if (event === 'pusher:subscribe' && data && filters.has(data.channel)) {
      data = { ...data, filter: filters.get(data.channel) };
    }
    return send(event, data, channel);
  };
  return filters;
}

/**
 * Subscribes to `channelName` with a tag filter (or none): the filter applies until the
 * channel is unsubscribed. To change it, unsubscribe first (the server keeps the filter
 * of a subscription for its whole life, spec "Tag filtering" rule 6).
 * @param {import('pusher-js').default} pusher
 * @param {string} channelName
 * @param {object | undefined | null} filter
 */
export function subscribeFiltered(pusher, channelName, filter) {
  if (filter !== undefined && filter !== null && (typeof filter !== 'object' || Array.isArray(filter))) {
    throw new TypeError('filter must be an object such as {key: "region", cmp: "eq", val: "eu"}');
  }
  const filters = filtersOf(pusher);
  const current = pusher.channel(channelName);
  if (current && (current.subscribed || current.subscriptionPending) && !sameFilter(filters.get(channelName), filter)) {
    throw new Error(`${channelName} is already subscribed with another filter: unsubscribe first`);
  }
  if (filter === undefined || filter === null) filters.delete(channelName);
  else filters.set(channelName, filter);
  return pusher.subscribe(channelName);
}

/** Unsubscribes and forgets the channel's filter. */
export function unsubscribeFiltered(pusher, channelName) {
  filtersOf(pusher).delete(channelName);
  pusher.unsubscribe(channelName);
}

function sameFilter(a, b) {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** Builders for the filter tree (short spellings on the wire). */
export const Filter = {
  eq: (key, val) => ({ key, cmp: 'eq', val }),
  neq: (key, val) => ({ key, cmp: 'neq', val }),
  in: (key, vals) => ({ key, cmp: 'in', vals }),
  nin: (key, vals) => ({ key, cmp: 'nin', vals }),
  exists: (key) => ({ key, cmp: 'ex' }),
  notExists: (key) => ({ key, cmp: 'nex' }),
  startsWith: (key, val) => ({ key, cmp: 'sw', val }),
  endsWith: (key, val) => ({ key, cmp: 'ew', val }),
  contains: (key, val) => ({ key, cmp: 'ct', val }),
  gt: (key, val) => ({ key, cmp: 'gt', val }),
  gte: (key, val) => ({ key, cmp: 'gte', val }),
  lt: (key, val) => ({ key, cmp: 'lt', val }),
  lte: (key, val) => ({ key, cmp: 'lte', val }),
  and: (...nodes) => ({ op: 'and', nodes }),
  or: (...nodes) => ({ op: 'or', nodes }),
  not: (node) => ({ op: 'not', nodes: [node] }),
};
