// ringcast console, the apps page: the app API (/api/app-store/apps, console token only) in
// plain JavaScript, no build step. App ids, keys and error texts are operator input: they go
// in as textContent, never HTML. A secret is shown once (after creation or rotation) and
// dropped from the page when dismissed.
/* global window, document, confirm -- a browser script */
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const { api, el, reloadAppSelect } = window.ringcastConsole;
  const BASE = '/api/app-store/apps';
  /** Apps a page (data-per-page on the table overrides it). */
  const perPage = () => Number($('apps').dataset.perPage) || 20;
  /** The fields the form shows; every other option is in the "Other settings" JSON. */
  const FORM_FIELDS = ['id', 'key', 'enabled', 'max_connections', 'enable_client_messages', 'allowed_origins'];
  let page = 1;
  /** The apps of the shown page, by id (what the API answered, without secrets). */
  let shown = new Map();
  /** The app being edited, or null for a new one. */
  let editing = null;

  const pathOf = (id) => BASE + '/' + encodeURIComponent(id);

  function status(text, isError) {
    $('apps-status').textContent = text;
    $('apps-status').className = isError ? 'error' : '';
  }

  function errorOf(r) {
    return (r.body && r.body.error) || 'Refused (' + r.status + ').';
  }

  // ── views: live and apps ────────────────────────────────────────────────────
  function showView(apps) {
    $('live-view').hidden = apps;
    $('apps-view').hidden = !apps;
    $('app-select-label').hidden = apps;
    $('show-live').setAttribute('aria-pressed', String(!apps));
    $('show-apps').setAttribute('aria-pressed', String(apps));
    if (apps) load();
  }

  $('show-live').addEventListener('click', () => showView(false));
  $('show-apps').addEventListener('click', () => showView(true));
  $('logout').addEventListener('click', () => {
    hideSecret();
    closeEditor();
    shown = new Map();
    $('apps').tBodies[0].replaceChildren();
    status('', false);
    page = 1;
    showView(false);
  });

  // ── the list, a page at a time ──────────────────────────────────────────────
  async function load() {
    const per = perPage();
    const r = await api(BASE + '?page=' + page + '&per_page=' + per);
    const body = $('apps').tBodies[0];
    if (r.status === 409) {
      // app_manager.driver array: the configuration file is the source of truth
      body.replaceChildren();
      shown = new Map();
      $('apps-view').dataset.readonly = 'true';
      $('apps-new').hidden = true;
      $('apps-page').textContent = '';
      $('apps-prev').disabled = true;
      $('apps-next').disabled = true;
      closeEditor();
      status('Read-only: ' + errorOf(r), false);
      return;
    }
    delete $('apps-view').dataset.readonly;
    $('apps-new').hidden = false;
    if (r.status !== 200) {
      status(errorOf(r), true);
      return;
    }
    const pages = Math.max(1, Math.ceil(r.body.total / per));
    if (page > pages) {
      page = pages; // the last app of the last page was deleted
      return load();
    }
    shown = new Map(r.body.apps.map((a) => [a.id, a]));
    body.replaceChildren(...r.body.apps.map(row));
    $('apps-page').textContent = 'Page ' + page + ' of ' + pages + ' (' + r.body.total + ' app' + (r.body.total === 1 ? '' : 's') + ')';
    $('apps-prev').disabled = page <= 1;
    $('apps-next').disabled = page >= pages;
    if (r.body.total === 0) status('The app store has no apps yet.', false);
    else if ($('apps-status').className === 'error') status('', false);
  }

  function row(a) {
    const tr = el('tr', undefined, { 'data-app': a.id, 'data-enabled': String(a.enabled) });
    const actions = el('td');
    const button = (label, action) => {
      const b = el('button', label, { type: 'button', 'data-action': action });
      b.addEventListener('click', () => act(action, a.id));
      return b;
    };
    actions.append(
      button('Edit', 'edit'),
      button(a.enabled ? 'Disable' : 'Enable', a.enabled ? 'disable' : 'enable'),
      button('Rotate secret', 'rotate'),
      button('Delete', 'delete'),
    );
    tr.append(el('td', a.id), el('td', a.key), el('td', a.enabled ? 'enabled' : 'disabled'),
      el('td', a.max_connections === null || a.max_connections === undefined ? 'no limit' : String(a.max_connections)), actions);
    return tr;
  }

  $('apps-prev').addEventListener('click', () => { if (page > 1) { page--; load(); } });
  $('apps-next').addEventListener('click', () => { page++; load(); });

  async function changed(message) {
    status(message, false);
    await load();
    await reloadAppSelect();
  }

  async function act(action, id) {
    const a = shown.get(id);
    if (!a) return;
    if (action === 'edit') return openEditor(a);
    if (action === 'disable' || action === 'enable') {
      const r = await api(pathOf(id), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(Object.assign({}, a, { enabled: action === 'enable' })) });
      if (r.status !== 200) return status(errorOf(r), true);
      return changed('App ' + id + ' ' + action + 'd.');
    }
    if (action === 'rotate') {
      if (!confirm('Rotate the secret of app ' + id + '? The old secret stops working at once.')) return;
      const r = await api(pathOf(id) + '/rotate-secret', { method: 'POST' });
      if (r.status !== 200) return status(errorOf(r), true);
      showSecret(id, r.body.secret);
      return changed('The secret of app ' + id + ' was rotated.');
    }
    if (action === 'delete') {
      if (!confirm('Delete app ' + id + '? Its clients are disconnected and its key stops working.')) return;
      const r = await api(pathOf(id), { method: 'DELETE' });
      if (r.status !== 204) return status(errorOf(r), true);
      if (editing && editing.id === id) closeEditor();
      return changed('App ' + id + ' deleted.');
    }
  }

  // ── a secret, shown once ────────────────────────────────────────────────────
  function showSecret(id, secret) {
    $('app-secret-id').textContent = id;
    $('app-secret-value').textContent = secret;
    $('app-secret').hidden = false;
  }

  function hideSecret() {
    $('app-secret-id').textContent = '';
    $('app-secret-value').textContent = '';
    $('app-secret').hidden = true;
  }

  $('app-secret-done').addEventListener('click', hideSecret);

  // ── create and edit ─────────────────────────────────────────────────────────
  function clearErrors() {
    for (const p of document.querySelectorAll('#app-form .field-error')) p.textContent = '';
    $('app-form-error').textContent = '';
  }

  function openEditor(a) {
    editing = a;
    clearErrors();
    $('app-editor-title').textContent = a ? 'Edit app ' + a.id : 'New app';
    $('app-save').textContent = a ? 'Save' : 'Create';
    $('edit-id').value = a ? a.id : '';
    $('edit-id').readOnly = Boolean(a);
    $('edit-key').value = a ? a.key : '';
    $('edit-enabled').checked = a ? a.enabled : true;
    $('edit-max-connections').value = a && a.max_connections !== null && a.max_connections !== undefined ? String(a.max_connections) : '';
    $('edit-client-messages').checked = a ? a.enable_client_messages : true;
    $('edit-origins').value = a && Array.isArray(a.allowed_origins) ? a.allowed_origins.join('\n') : '';
    const extra = {};
    if (a) for (const [k, v] of Object.entries(a)) if (!FORM_FIELDS.includes(k)) extra[k] = v;
    $('edit-extra').value = JSON.stringify(extra, null, 2);
    $('app-editor').hidden = false;
    (a ? $('edit-key') : $('edit-id')).focus();
  }

  function closeEditor() {
    editing = null;
    clearErrors();
    $('app-editor').hidden = true;
  }

  $('apps-new').addEventListener('click', () => openEditor(null));
  $('app-cancel').addEventListener('click', closeEditor);

  /** The form as the API's JSON body, or null (an error shown) when "Other settings" is not a JSON object. */
  function formBody() {
    let extra;
    try {
      extra = JSON.parse($('edit-extra').value.trim() || '{}');
    } catch (err) {
      fieldError('extra', 'Other settings must be JSON: ' + err.message);
      return null;
    }
    if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) {
      fieldError('extra', 'Other settings must be a JSON object, such as {"max_event_payload_in_kb": 50}.');
      return null;
    }
    const max = $('edit-max-connections').value.trim();
    // a number as a number; anything else as typed, for the API to name what is wrong
    const maxValue = max === '' ? null : /^-?\d+$/.test(max) ? Number(max) : max;
    const origins = $('edit-origins').value.split('\n').map((s) => s.trim()).filter((s) => s !== '');
    return Object.assign(extra, {
      id: $('edit-id').value.trim(), key: $('edit-key').value.trim(), enabled: $('edit-enabled').checked,
      max_connections: maxValue, enable_client_messages: $('edit-client-messages').checked, allowed_origins: origins,
    });
  }

  function fieldError(field, text) {
    const p = document.querySelector('#app-form .field-error[data-field="' + field + '"]');
    p.textContent = p.textContent ? p.textContent + ' ' + text : text;
  }

  /**
   * The API's error, field by field: each of its issues ("app: max_connections must be …")
   * goes under the field it names; an option without a field of its own goes under "Other
   * settings"; the rest under the form.
   */
  function showErrors(r) {
    const text = errorOf(r);
    for (const issue of text.split(/; (?=app: )/)) {
      const m = /^app: ([A-Za-z0-9_]+)/.exec(issue);
      const named = m ? m[1] : /^(id|key) /.test(issue) ? issue.split(' ')[0] : /^app "/.test(issue) ? 'id' : null;
      if (named === null) {
        $('app-form-error').textContent = ($('app-form-error').textContent + ' ' + issue).trim();
        continue;
      }
      fieldError(FORM_FIELDS.includes(named) ? named : 'extra', m ? issue.slice(5) : issue);
    }
  }

  $('app-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const body = formBody();
    if (body === null) return;
    const was = editing;
    let r;
    if (was) {
      body.id = was.id;
      r = await api(pathOf(was.id), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    } else {
      if (body.id === '') return fieldError('id', 'An app id is needed.');
      r = await api(BASE, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    }
    if (r.status !== 200 && r.status !== 201) return showErrors(r);
    closeEditor();
    if (!was) showSecret(r.body.id, r.body.secret);
    await changed(was ? 'App ' + was.id + ' saved.' : 'App ' + r.body.id + ' created.');
  });
})();
