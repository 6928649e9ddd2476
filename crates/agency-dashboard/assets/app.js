// The dashboard's core: building elements (text only, never markup),
// the JSON API with the CSRF token, the live event stream and the tabs.
// Pages (pages.js) register in PAGES.
'use strict';

const PAGES = {};
const state = { csrf: null, page: null, arg: null, lastData: {}, refreshTimer: null, inFlight: false };

// h('td', {class: 'x', onclick: f}, 'text', child): an element whose
// string children become text nodes. No innerHTML anywhere.
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
function svg(tag, attrs, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function ago(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h ago';
  return (s / 86400).toFixed(1) + ' d ago';
}
function when(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '—'; }
function usd(micro) { return '$' + ((micro || 0) / 1e6).toFixed(4); }
function short(id) { return id ? String(id).slice(0, 8) : '—'; }
function tokens(u) { return u ? (u.usage.input_tokens + u.usage.output_tokens) : 0; }
// Every kind, cache included: what a subtree's running total counts.
function allTokens(u) { return u ? (u.usage.input_tokens + u.usage.output_tokens + u.usage.cache_read_tokens + u.usage.cache_write_tokens) : 0; }

function showError(msg) {
  const e = document.getElementById('error');
  e.textContent = msg || '';
  e.hidden = !msg;
}

async function api(path) {
  const r = await fetch('/dashboard/api/' + path, { credentials: 'same-origin' });
  if (r.status === 401) { location.reload(); throw new Error('not logged in'); }
  const body = await r.json();
  if (!r.ok) throw new Error(body && body.error ? body.error.message : ('failed to read ' + path));
  return body;
}

async function act(path, body) {
  const r = await fetch('/dashboard/api/' + path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': state.csrf },
    body: JSON.stringify(body || {}),
  });
  const out = await r.json().catch(() => null);
  if (!r.ok) {
    showError(out && out.error ? out.error.message : ('failed to ' + path));
    return null;
  }
  showError('');
  refresh(true);
  return out;
}

// The page re-fetches its view; the last one stays shown while it loads
// or if the fetch fails (marked stale).
async function refresh(now) {
  if (!now) {
    // At most one redraw per half second: a busy stream (many agents)
    // neither floods the daemon nor starves the page of redraws.
    if (state.refreshTimer) return;
    state.refreshTimer = setTimeout(() => { state.refreshTimer = null; refresh(true); }, 500);
    return;
  }
  if (state.inFlight) { state.again = true; return; }
  const root = document.getElementById('page');
  // Never redraw under the user's fingers: while a field of the page has
  // the focus, the redraw waits until it loses it.
  const active = document.activeElement;
  if (active && root.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) {
    if (!state.waitBlur) {
      state.waitBlur = true;
      active.addEventListener('blur', () => { state.waitBlur = false; refresh(false); }, { once: true });
    }
    return;
  }
  state.inFlight = true;
  const page = PAGES[state.page];
  try {
    const view = await page.render(state.arg);
    root.replaceChildren(view);
    showError('');
  } catch (err) {
    showError('failed to refresh: ' + err.message + ' (showing the last known values)');
  } finally {
    state.inFlight = false;
    if (state.again) { state.again = false; refresh(false); }
  }
  updateNeedsCount();
}

// The tab's count: at most one read a second, however busy the stream.
function updateNeedsCount() {
  if (state.countTimer) return;
  state.countTimer = setTimeout(() => { state.countTimer = null; readNeedsCount(); }, 1000);
}

async function readNeedsCount() {
  try {
    const n = await api('needs-you');
    const c = n.approvals.length + n.stalled.length + n.paused.length + n.failed_runs.length + (n.stopped_pipelines || []).length + n.mcp_changes.length + (n.lessons || []).length + n.problems.length;
    document.getElementById('needs-count').textContent = c ? String(c) : '';
  } catch (_) { /* kept as it was */ }
}

function route() {
  const [page, arg] = (location.hash.slice(1) || 'needs').split('/');
  state.page = PAGES[page] ? page : 'needs';
  state.arg = arg ? decodeURIComponent(arg) : null;
  for (const a of document.querySelectorAll('#tabs a')) {
    a.classList.toggle('active', a.dataset.page === state.page);
  }
  document.getElementById('page').replaceChildren(h('p', { class: 'muted' }, 'loading…'));
  refresh(true);
}

function addActivity(ev) {
  const list = document.getElementById('activity');
  list.prepend(h('li', { 'data-kind': ev.kind, 'data-seq': ev.seq },
    h('span', { class: 'muted' }, when(ev.at).slice(11), ' '),
    h('span', { class: 'kind' }, ev.kind),
    ev.handler_title ? h('b', {}, ev.handler_title, ': ') : null,
    ev.summary));
  while (list.children.length > 50) list.lastChild.remove();
}

function connect() {
  const conn = document.getElementById('conn');
  const es = new EventSource('/dashboard/api/events/stream');
  es.onopen = () => { conn.textContent = 'live'; conn.className = 'conn live'; };
  es.onerror = () => { conn.textContent = 'reconnecting…'; conn.className = 'conn reconnecting'; };
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (_) { return; }
    addActivity(ev);
    const page = PAGES[state.page];
    const kinds = page && page.kinds;
    if (!kinds || kinds.some((k) => ev.kind === k || ev.kind.startsWith(k + '.'))) refresh(false);
    else updateNeedsCount();
  };
}

async function start() {
  try {
    state.csrf = (await api('session')).csrf;
  } catch (err) {
    showError(err.message);
    return;
  }
  document.getElementById('logout').addEventListener('click', async () => {
    await fetch('/dashboard/api/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': state.csrf } });
    location.reload();
  });
  window.addEventListener('hashchange', route);
  route();
  connect();
}

document.addEventListener('DOMContentLoaded', start);
