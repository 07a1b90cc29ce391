// Delta compression for a pusher-js client: turns it on, decodes pusher:delta (Fossil and
// Xdelta3) and pusher:delta_cache_sync, so that channel.bind('price', cb) receives the
// original data, and answers with pusher:delta_sync_error when a delta cannot be applied
// (the server then sends that channel's next messages in full).
//
//   import Pusher from 'pusher-js';
//   import { withDeltaCompression } from 'ringcast/client/delta.js';
//   const pusher = new Pusher(key, { wsHost, wsPort, forceTLS: false, enabledTransports: ['ws'] });
//   const delta = await withDeltaCompression(pusher, { xdelta3: true });
//   pusher.subscribe('ticker').bind('price', (data) => …);   // decoded data
//
// pusher-js parses frames itself and drops fields it does not know (the `__delta_seq` of
// a full message), so the raw frames are read from its transport connection
// (pusher.connection.connection.transport, pusher-js 8), after pusher-js has handled them.

import { createDeltaDecoder } from './delta-core.js';

export { DeltaDecoder, createDeltaDecoder } from './delta-core.js';

function parseData(data) {
  if (typeof data !== 'string') return data;
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}

/**
 * @param pusher a pusher-js instance (connected or not)
 * @param {{xdelta3?: boolean | Function, algorithm?: string, enable?: boolean}} opts
 *   enable (default true): send pusher:enable_delta_compression on every connection (every
 *   subscription then takes deltas unless its own `delta` or the server says otherwise)
 * @returns {Promise<{decoder, stats, detach(): void}>}
 */
export async function withDeltaCompression(pusher, opts = {}) {
  const decoder = await createDeltaDecoder(opts);
  const enable = opts.enable !== false;
  let transport = null;
  /** The transport the opt-in was sent on: once per connection, before its first subscribe. */
  let enabledOn = null;
  const send = pusher.send_event;
  const optIn = () => {
    const t = pusher.connection?.connection?.transport ?? null;
    if (!enable || t === null || t === enabledOn) return;
    enabledOn = t;
    send.call(pusher, 'pusher:enable_delta_compression', {});
  };
  // pusher-js subscribes on connect before a 'connected' listener of ours runs: the opt-in
  // goes first, so every subscription is resolved with it (history channels take deltas
  // from their subscribe only: docs/history.md, "With delta compression")
  pusher.send_event = function (event, data, channel) {
    if (event === 'pusher:subscribe') optIn();
    return send.call(pusher, event, data, channel);
  };
  const onRaw = (messageEvent) => {
    const text = typeof messageEvent?.data === 'string' ? messageEvent.data : null;
    if (text === null) return;
    const r = decoder.receive(text);
    if (r === null) return;
    if (r.type === 'sync_error') {
      pusher.send_event('pusher:delta_sync_error', { channel: r.channel });
      return;
    }
    const channel = pusher.channel(r.channel);
    if (!channel) return;
    const event = { event: r.event, channel: r.channel, data: parseData(r.data) };
    if (r.userId !== undefined) event.user_id = r.userId;
    channel.handleEvent(event);
  };
  const attach = () => {
    const t = pusher.connection?.connection?.transport;
    if (!t || t === transport) return;
    transport = t;
    // every connection starts without bases
    decoder.bases.clear();
    t.bind('message', onRaw);
    optIn();
  };
  pusher.connection.bind('connected', attach);
  if (pusher.connection.state === 'connected') attach();
  return {
    decoder,
    stats: decoder.stats,
    detach() {
      pusher.connection.unbind('connected', attach);
      transport?.unbind('message', onRaw);
      transport = null;
      pusher.send_event = send;
    },
  };
}
