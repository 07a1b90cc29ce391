// Exact recovery for pusher-js (ringcast's "History, rewind and recovery" extension,
// docs/protocol.md): remembers each channel's epoch and last serial and asks the server to
// resume after it on every (re)subscribe, so that a client cut off (network drop, server
// restart, a laptop lid) gets exactly the messages it missed, in order, once.
//
//   import Pusher from 'pusher-js';
//   import { withRecovery } from 'ringcast/client/recovery.js';
//   const pusher = new Pusher(key, { wsHost, wsPort, forceTLS: false, cluster: 'mt1' });
//   const recovery = withRecovery(pusher, { onFailed: (channel, info) => reloadFromRestHistory(channel) });
//   pusher.subscribe('chat').bind('message', cb);                // replayed + live, no gap, no dup
//   pusher.channel('chat').bind('ringcast:recovery_failed', (info) => …);   // or per channel
//
// Laravel Echo: withRecovery(Echo.connector.pusher) before subscribing.
//
// How: pusher-js builds pusher:subscribe itself (and again for every channel after a
// reconnect), so send_event is wrapped once to add `recover` ({} the first time: positions
// only; then {epoch, serial}). pusher-js drops the `__serial` field of message frames and
// swallows pusher_internal:recovery, so the raw frames are read from its transport
// connection (pusher.connection.connection.transport, pusher-js 8), after pusher-js has
// handled them. Works beside client/filter.js (another send_event wrapper) and
// client/delta.js (another transport listener and send_event wrapper): on a history channel
// with delta compression the position also moves with each pusher:delta (`serial` in its data).

const installed = new WeakMap();

/**
 * @param {import('pusher-js').default} pusher
 * @param {{ onFailed?: (channel: string, info: object) => void, channels?: (name: string) => boolean }} [opts]
 *   onFailed: a resume the server could not do (reason no_history, epoch_changed, too_old,
 *   too_many, invalid, unavailable); the app reloads from REST history. The same info is
 *   emitted on the channel as `ringcast:recovery_failed`.
 *   channels: which channels ask for positions (default: all).
 * @returns {{ positions: Map<string, {epoch: string, serial: number}>, forget(channel: string): void, detach(): void }}
 */
export function withRecovery(pusher, opts = {}) {
  const had = installed.get(pusher);
  if (had) return had;
  const wanted = opts.channels ?? (() => true);
  /** channel → { epoch, serial }: the last message this client got of it */
  const positions = new Map();
  const send = pusher.send_event;
  pusher.send_event = function (event, data, channel) {
    if (event === 'pusher:subscribe' && data && typeof data.channel === 'string' && wanted(data.channel)) {
      const p = positions.get(data.channel);
      data = { ...data, recover: p && p.epoch ? { epoch: p.epoch, serial: p.serial } : {} };
    } else if (event === 'pusher:unsubscribe' && data && typeof data.channel === 'string') {
      positions.delete(data.channel); // left on purpose: a later subscribe starts afresh
    }
    return send.call(pusher, event, data, channel);
  };

  function onFrame(f) {
    if (typeof f.channel !== 'string') return;
    if (f.event === 'pusher_internal:recovery') {
      const d = typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
      const asked = positions.get(f.channel);
      // the replay that follows moves it on message by message: before it, the position is
      // the one asked (a tag-filtered subscription's replay holds the matching messages
      // only, so serial − missed is not it), or serial − missed for a rewind
      const resumed = d.recovered && asked && asked.epoch === d.epoch;
      positions.set(f.channel, { epoch: d.epoch, serial: resumed ? asked.serial : d.serial - (d.missed || 0) });
      if (!d.recovered && d.reason) {
        if (d.reason !== 'epoch_changed' && !(asked && asked.epoch)) return; // nothing was asked
        opts.onFailed?.(f.channel, d);
        pusher.channel(f.channel)?.emit('ringcast:recovery_failed', d);
      }
      return;
    }
    // a message frame: `__serial`; a pusher:delta (client/delta.js decodes it): `serial` in its data
    let serial = f.__serial;
    if (serial === undefined && typeof f.event === 'string' && f.event.endsWith(':delta')) {
      const d = typeof f.data === 'string' ? JSON.parse(f.data) : f.data;
      serial = d?.serial;
    }
    // serials may jump: a tag-filtered subscription gets the channel's serials of the
    // messages that pass its filter only, so a jump is never taken for a loss (the server
    // reports a loss itself: pusher_internal:recovery with recovered false)
    if (typeof serial === 'number') {
      const p = positions.get(f.channel);
      if (p && serial > p.serial) p.serial = serial;
    }
  }

  let transport = null;
  const onRaw = (messageEvent) => {
    const text = typeof messageEvent?.data === 'string' ? messageEvent.data : null;
    // cheap test first: most frames of other channels carry neither
    if (text === null || (!text.includes('serial":') && !text.includes('pusher_internal:recovery'))) return;
    try {
      onFrame(JSON.parse(text));
    } catch {
      // not JSON: pusher-js has reported it already
    }
  };
  const attach = () => {
    const t = pusher.connection?.connection?.transport;
    if (!t || t === transport) return;
    transport = t;
    t.bind('message', onRaw);
  };
  pusher.connection.bind('connected', attach);
  if (pusher.connection.state === 'connected') attach();

  const api = {
    positions,
    /** Forgets a channel's position (its next subscribe asks for positions only). */
    forget(channel) {
      positions.delete(channel);
    },
    detach() {
      pusher.connection.unbind('connected', attach);
      transport?.unbind('message', onRaw);
      transport = null;
      pusher.send_event = send;
      installed.delete(pusher);
    },
  };
  installed.set(pusher, api);
  return api;
}
