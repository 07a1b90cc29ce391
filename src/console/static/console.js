// ringcast live console: plain JavaScript, no build step (served by src/console/server.ts).
// Every value shown comes from clients or the API, so it goes in as textContent, never HTML.
/* global window, document, fetch, setInterval, clearInterval, setTimeout, AbortController, TextDecoder -- a browser script */
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const MAX_LOG = 500;
  /** { token, app } of the login, kept in memory only. */
  let auth = null;
  let current = null;
  let poll = null;
  let stream = null;

  function headers(extra) {
    const h = Object.assign({ authorization: 'Bearer ' + auth.token }, extra || {});
    if (auth.app) h['x-console-app'] = auth.app;
    return h;
  }

  async function api(path, opts) {
    const o = opts || {};
    const res = await fetch(path, Object.assign({}, o, { headers: headers(o.headers) }));
    let body = null;
    try { body = await res.json(); } catch { body = null; }
    return { status: res.status, body };
  }

  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  // ── login ───────────────────────────────────────────────────────────────────
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('login-error').textContent = '';
    auth = { token: $('login-token').value, app: $('login-app').value.trim() };
    let r;
    try {
      r = await api('/api/session');
    } catch {
      r = { status: 0, body: null };
    }
    if (r.status !== 200) {
      auth = null;
      $('login-error').textContent = r.body && r.body.error ? r.body.error : 'The console did not answer (' + r.status + ').';
      return;
    }
    const apps = r.body.apps;
    fillAppSelect(apps);
    $('who').textContent = auth.app ? 'app ' + auth.app : 'console token';
    $('login').hidden = true;
    $('main').hidden = false;
    if (apps.length > 0) selectApp(apps[0].id);
  });

  function fillAppSelect(apps) {
    $('app-select').replaceChildren(...apps.map((a) => el('option', a.id + (a.enabled ? '' : ' (disabled)'), { value: a.id })));
  }

  /** The app list of the selector again (the apps page changed an app); the shown app stays if it still exists. */
  async function reloadAppSelect() {
    if (!auth) return;
    const r = await api('/api/session');
    if (r.status !== 200) return;
    fillAppSelect(r.body.apps);
    if (r.body.apps.some((a) => a.id === current)) $('app-select').value = current;
    else if (r.body.apps.length > 0) selectApp(r.body.apps[0].id);
    else { stop(); current = null; }
  }

  $('logout').addEventListener('click', () => {
    stop();
    auth = null;
    current = null;
    $('login-token').value = '';
    $('who').textContent = '';
    $('main').hidden = true;
    $('login').hidden = false;
  });

  $('app-select').addEventListener('change', () => selectApp($('app-select').value));

  function stop() {
    if (poll) clearInterval(poll);
    poll = null;
    if (stream) stream.abort();
    stream = null;
  }

  function selectApp(id) {
    stop();
    current = id;
    $('log').replaceChildren();
    $('history').tBodies[0].replaceChildren();
    $('history-result').textContent = '';
    $('history-older').hidden = true;
    refresh();
    poll = setInterval(refresh, 1000);
    watch(id);
  }

  // ── state: connections, channels, presence members ─────────────────────────
  async function refresh() {
    const id = current;
    if (!id || !auth) return;
    let r;
    try {
      r = await api('/api/apps/' + encodeURIComponent(id));
    } catch {
      return;
    }
    if (id !== current || r.status !== 200) return;
    render(r.body);
  }

  function render(s) {
    $('connections').textContent = String(s.connections);
    $('channel-count').textContent = String(s.channels.length);
    $('channels').tBodies[0].replaceChildren(...s.channels.map((c) => {
      const tr = el('tr', undefined, { 'data-channel': c.name });
      tr.append(el('td', c.name), el('td', String(c.subscription_count), { class: 'subs' }), el('td', c.user_count === null ? '' : String(c.user_count)));
      return tr;
    }));
    $('channels-truncated').hidden = !s.truncated;
    const names = Object.keys(s.presence);
    if (names.length === 0) {
      $('presence').replaceChildren(el('p', 'No presence channel is occupied.', { class: 'empty' }));
      return;
    }
    $('presence').replaceChildren(...names.map((name) => {
      const box = el('div', undefined, { 'data-channel': name });
      const list = el('ul');
      for (const m of s.presence[name]) {
        list.append(el('li', String(m.user_id) + (m.user_info === undefined || m.user_info === null ? '' : ' ' + JSON.stringify(m.user_info)), { class: 'member' }));
      }
      box.append(el('h3', name), list);
      return box;
    }));
  }

  // ── live log: text/event-stream read with fetch (it needs the Authorization header) ──
  async function watch(id) {
    const ctrl = new AbortController();
    stream = ctrl;
    try {
      const res = await fetch('/api/apps/' + encodeURIComponent(id) + '/events', { headers: headers(), signal: ctrl.signal });
      if (res.status !== 200) throw new Error('events answered ' + res.status);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const chunk = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of chunk.split('\n')) if (line.startsWith('data: ')) addLog(JSON.parse(line.slice(6)));
        }
      }
    } catch {
      if (ctrl.signal.aborted) return;
    }
    // the stream ended (server restart, network): try again while this app is shown
    if (stream === ctrl && current === id) setTimeout(() => { if (stream === ctrl && current === id) watch(id); }, 2000);
  }

  function describe(e) {
    switch (e.kind) {
      case 'connection': return 'connection ' + e.op + ' ' + e.socket_id;
      case 'api': return 'api ' + e.event + ' on ' + e.channel + (e.op === 'console' ? ' (from the console)' : '') + ': ' + (e.data || '');
      case 'client': return 'client ' + e.event + ' on ' + e.channel + (e.socket_id ? ' from ' + e.socket_id : '') + ': ' + (e.data || '');
      case 'user': return 'to user ' + e.channel + ': ' + e.event + ' ' + (e.data || '');
      case 'count': return 'subscription count of ' + e.channel + ': ' + (e.data || '');
      case 'member': return 'member ' + e.op + ' ' + e.user_id + ' on ' + e.channel + (e.data ? ' ' + e.data : '');
      case 'webhook': return 'webhook ' + (e.event || '') + ' ' + (e.op || '') + (e.data ? ': ' + e.data : '');
      case 'hook': return e.event + ' hook ' + e.op + (e.channel ? ' on ' + e.channel : '') + (e.socket_id ? ' for ' + e.socket_id : '') + (e.data ? ': ' + e.data : '');
      case 'dropped': return e.count + ' events not shown (' + (e.reason === 'slow_client' ? 'this page read too slowly' : 'over the live log limit') + ')';
      default: return e.kind + ' ' + JSON.stringify(e);
    }
  }

  function addLog(e) {
    const t = new Date(e.t).toISOString().slice(11, 23);
    const li = el('li', t + '  ' + describe(e), { 'data-kind': e.kind });
    const log = $('log');
    log.prepend(li);
    while (log.children.length > MAX_LOG) log.lastChild.remove();
  }

  $('clear-log').addEventListener('click', () => $('log').replaceChildren());

  // ── history of a channel: pages of stored messages, newest first ────────────
  let historyNext = null;

  async function showHistory(channel, cursor) {
    const out = $('history-result');
    out.className = '';
    let path = '/api/apps/' + encodeURIComponent(current) + '/history?channel=' + encodeURIComponent(channel) + '&limit=50';
    if (cursor) path += '&cursor=' + encodeURIComponent(cursor);
    const r = await api(path);
    const body = $('history').tBodies[0];
    if (!cursor) body.replaceChildren();
    if (r.status !== 200) {
      out.className = 'error';
      out.textContent = (r.body && r.body.error) || 'Refused (' + r.status + ').';
      $('history-older').hidden = true;
      return;
    }
    for (const m of r.body.items) {
      const tr = el('tr', undefined, { 'data-serial': String(m.serial) });
      const data = typeof m.data === 'string' ? m.data : JSON.stringify(m.data);
      tr.append(el('td', String(m.serial)), el('td', new Date(m.time_ms).toISOString()), el('td', m.event), el('td', data === undefined ? '' : data));
      body.append(tr);
    }
    out.textContent = 'Epoch ' + r.body.epoch + ': ' + body.rows.length + ' message' + (body.rows.length === 1 ? '' : 's') + ' shown, newest first.';
    historyNext = r.body.next_cursor ? { channel, cursor: r.body.next_cursor } : null;
    $('history-older').hidden = historyNext === null;
  }

  $('history-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    showHistory($('history-channel').value.trim(), null);
  });
  $('history-older').addEventListener('click', () => { if (historyNext) showHistory(historyNext.channel, historyNext.cursor); });

  // ── publish a test event ────────────────────────────────────────────────────
  $('publish-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const out = $('publish-result');
    out.textContent = '';
    out.className = '';
    const body = { channel: $('publish-channel').value.trim(), event: $('publish-event').value.trim(), data: $('publish-data').value };
    const r = await api('/api/apps/' + encodeURIComponent(current) + '/publish', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    if (r.status === 200) out.textContent = 'Published ' + body.event + ' to ' + body.channel + '.';
    else {
      out.className = 'error';
      out.textContent = (r.body && r.body.error) || 'Refused (' + r.status + ').';
    }
  });

  // for the apps page (console-apps.js)
  window.ringcastConsole = { api, el, reloadAppSelect };
})();
