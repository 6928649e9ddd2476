// The dashboard's pages: each renders its view from the JSON API into
// elements (text set with textContent through h()), and names the event
// kinds that change it (null: every event).
'use strict';

function table(headers, rows, empty) {
  if (!rows.length) return h('p', { class: 'empty' }, empty || 'nothing');
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((t) => h('th', {}, t)))), h('tbody', {}, rows));
}
function titleOf(n, id) {
  const t = n.titles.find((x) => x.handler === id);
  return t ? t.title : short(id);
}
function guidanceForm(handler) {
  const ta = h('textarea', { placeholder: 'Guidance for this handler (sent as mail from you)', 'aria-label': 'guidance' });
  return h('div', {}, ta, h('button', { class: 'primary', onclick: () => {
    if (ta.value.trim()) act('handlers/' + handler + '/mail', { text: ta.value, subject: 'Guidance' });
  } }, 'Send guidance'));
}

PAGES.needs = {
  kinds: ['approval', 'handler', 'budget', 'agent', 'mail', 'problem', 'pipeline', 'lesson'],
  async render() {
    const n = await api('needs-you');
    const rows = [];
    for (const a of n.approvals) {
      rows.push(h('tr', { 'data-row': 'approval', 'data-id': a.id },
        h('td', {}, h('span', { class: 'row-reason' }, 'Approval: ', a.tool), h('div', { class: 'muted' }, a.reason)),
        h('td', {}, titleOf(n, a.handler), h('pre', { class: 'args' }, a.args)),
        h('td', {}, ago(a.created_at)),
        h('td', {}, h('button', { class: 'primary', 'data-action': 'approve', onclick: () => act('approvals/' + a.id + '/approve') }, 'Approve'),
          h('button', { 'data-action': 'deny', onclick: () => act('approvals/' + a.id + '/deny', { reason: 'denied from the dashboard' }) }, 'Deny'))));
    }
    for (const s of n.stalled) {
      rows.push(h('tr', { 'data-row': 'stalled', 'data-id': s.handler },
        h('td', {}, h('span', { class: 'row-reason' }, 'Stalled'), h('div', { class: 'muted' }, s.reason)),
        h('td', {}, s.title),
        h('td', {}, '—'),
        h('td', {}, guidanceForm(s.handler), h('button', { class: 'danger', onclick: () => act('handlers/' + s.handler + '/stop') }, 'Stop'))));
    }
    for (const p of n.paused) {
      // One field per limit set on the budget, pre-filled: raise the one
      // that was reached (the reason names it) and send them all back.
      const limits = p.limits || {};
      const fields = Object.entries(limits).filter(([, v]) => v !== null).map(([k, v]) =>
        h('label', { class: 'limit' }, k, ' ', h('input', { type: 'number', min: '0', value: v, 'data-limit': k, 'aria-label': k })));
      const form = h('div', {}, fields);
      rows.push(h('tr', { 'data-row': 'paused', 'data-id': p.handler },
        h('td', {}, h('span', { class: 'row-reason' }, p.pause.reason.startsWith('paused by the user') ? 'Paused by you' : 'Budget paused'), h('div', { class: 'muted' }, p.pause.reason)),
        h('td', {}, p.title),
        h('td', {}, ago(p.pause.since)),
        h('td', {}, h('button', { class: 'primary', onclick: () => act('handlers/' + p.handler + '/resume') }, 'Resume'),
          fields.length ? [form, h('button', { onclick: () => {
            const body = Object.assign({}, limits);
            for (const i of form.querySelectorAll('input[data-limit]')) body[i.dataset.limit] = Number(i.value);
            act('handlers/' + p.handler + '/budget', body);
          } }, 'Raise')] : null)));
    }
    for (const r of n.failed_runs) {
      rows.push(h('tr', { 'data-row': 'failed_run', 'data-id': r.agent },
        h('td', {}, h('span', { class: 'row-reason' }, 'Run failed'), h('div', { class: 'muted' }, r.ended_how || r.end_reason || '')),
        h('td', {}, titleOf(n, r.handler)),
        h('td', {}, ago(r.ended_at)),
        h('td', {}, h('a', { href: '#runs/' + r.agent }, 'Open run'))));
    }
    for (const p of (n.stopped_pipelines || [])) {
      const at = p.stage_name ? ' at stage ' + (p.stage + 1) + ' (' + p.stage_name + ')' : '';
      rows.push(h('tr', { 'data-row': 'pipeline', 'data-id': p.id },
        h('td', {}, h('span', { class: 'row-reason' }, p.status === 'paused' ? 'Pipeline paused' : 'Pipeline failed'),
          h('div', { class: 'muted' }, p.pipeline + at)),
        h('td', {}, titleOf(n, p.id)),
        h('td', {}, ago(p.ended_at || p.created_at)),
        h('td', {}, p.status === 'paused'
          ? h('span', { class: 'muted' }, 'Raise or resume the budget above it')
          : h('code', {}, 'agency pipeline show ' + short(p.id)))));
    }
    for (const c of n.mcp_changes) {
      rows.push(h('tr', { 'data-row': 'mcp_change', 'data-id': c.id },
        h('td', {}, h('span', { class: 'row-reason' }, 'MCP tool changed: ', c.server, '/', c.tool)),
        h('td', {}, h('pre', {}, JSON.stringify(c.new, null, 2))),
        h('td', {}, ago(c.seen_at)),
        h('td', {}, h('button', { class: 'primary', onclick: () => act('mcp/changes/' + c.id + '/approve') }, 'Approve'),
          h('button', { onclick: () => act('mcp/changes/' + c.id + '/reject') }, 'Reject'))));
    }
    for (const l of (n.lessons || [])) {
      // A tool-policy or permission lesson a pipeline learned: recalled
      // only once the user approves it (lessons.js has the decisions).
      rows.push(h('tr', { 'data-row': 'lesson', 'data-id': l.id },
        h('td', {}, h('span', { class: 'row-reason' }, 'Lesson to approve: ', l.scope.kind), h('div', { class: 'muted' }, 'pipeline ' + l.pipeline + ', from ' + l.supporting_runs.length + ' run(s)')),
        h('td', {}, h('a', { href: '#lessons/' + l.id }, l.title), h('div', { class: 'muted' }, 'when: ', l.trigger), h('pre', { class: 'advice' }, l.advice)),
        h('td', {}, ago(l.updated_at)),
        h('td', {}, h('button', { class: 'primary', 'data-action': 'approve', onclick: () => act('lessons/' + l.id + '/approve') }, 'Approve'),
          reasonAction('lessons/' + l.id + '/reject', 'Reject', 'why not'))));
    }
    for (const p of n.problems) {
      // The summary says what was found and what to do; the action opens
      // where it is done.
      const where = p.kind === 'approval_stale' ? ['#approvals', 'Open approvals']
        : p.kind === 'budget_near' ? ['#costs', 'Open costs']
        : p.agent ? ['#runs/' + p.agent, 'Open run'] : ['#org', 'Open organisation'];
      rows.push(h('tr', { 'data-row': 'problem' },
        h('td', {}, h('span', { class: 'row-reason' }, 'Problem: ', p.kind)),
        h('td', {}, (p.handler_title ? p.handler_title + ': ' : '') + p.summary),
        h('td', {}, ago(p.opened_at)),
        h('td', {}, h('a', { href: where[0] }, where[1]))));
    }
    return h('div', {}, h('h1', {}, 'Needs you'),
      table(['Reason', 'What', 'Age', 'Action'], rows, 'Nothing waits for you.'));
  },
};

PAGES.org = {
  kinds: null,
  async render() {
    const o = await api('org');
    const byId = new Map(o.cards.map((c) => [c.handler.id, c]));
    // Tree order: each handler after its boss, depth-first.
    const kids = new Map();
    for (const c of o.cards) {
      const b = byId.has(c.handler.boss) ? c.handler.boss : null;
      if (!kids.has(b)) kids.set(b, []);
      kids.get(b).push(c);
    }
    const ordered = [];
    const depthOf = new Map();
    const walk = (b, d) => { for (const c of kids.get(b) || []) { ordered.push(c); depthOf.set(c.handler.id, d); walk(c.handler.id, d + 1); } };
    walk(null, 0);
    const depth = (c) => depthOf.get(c.handler.id) || 0;
    const cards = ordered.map((c) => {
      const hd = c.handler;
      const state = hd.status !== 'active' ? 'stopped' : hd.paused ? 'paused' : hd.stalled ? 'stalled' : '';
      const limit = c.limits && c.limits.micro_usd;
      const spent = c.subtree.micro_usd;
      return h('div', { class: 'card ' + state, 'data-handler': hd.id },
        h('h3', {}, '↳'.repeat(depth(c)), ' ', hd.title),
        h('div', {}, h('span', { class: 'badge' }, hd.status),
          hd.live_agent ? h('span', { class: 'badge live' }, 'live') : null,
          hd.stalled ? h('span', { class: 'badge stalled' }, 'stalled') : null,
          hd.paused ? h('span', { class: 'badge paused' }, 'paused') : null),
        h('dl', {},
          h('dt', {}, 'agent'), h('dd', {}, hd.live_agent ? short(hd.live_agent) + ' since ' + ago(c.live_since) : 'none'),
          h('dt', {}, 'last activity'), h('dd', {}, ago(c.last_activity)),
          h('dt', {}, 'inbox'), h('dd', {}, String(hd.inbox_depth)),
          h('dt', {}, 'tokens self / subtree'), h('dd', {}, allTokens(c.own) + ' / ' + c.subtree.tokens),
          h('dt', {}, 'cost self / subtree'), h('dd', {}, usd(c.own.cost_micro_usd) + ' / ' + usd(spent) + (limit ? ' of ' + usd(limit) : '')),
          h('dt', {}, 'model'), h('dd', {}, c.model || 'default'),
          hd.stalled ? [h('dt', {}, 'stalled'), h('dd', {}, hd.stalled)] : null,
          hd.paused ? [h('dt', {}, 'paused'), h('dd', {}, hd.paused.reason)] : null),
        limit ? h('div', { class: 'bar' + (spent > limit ? ' over' : '') }, h('div', { style: null, 'data-pct': Math.min(100, Math.round(100 * spent / limit)) })) : null,
        hd.status === 'active' ? h('div', {},
          hd.paused ? h('button', { class: 'primary', onclick: () => act('handlers/' + hd.paused.by + '/resume') }, 'Resume')
            : h('button', { onclick: () => act('handlers/' + hd.id + '/pause') }, 'Pause subtree'),
          hd.boss ? h('button', { class: 'danger', onclick: () => act('handlers/' + hd.id + '/stop') }, 'Stop subtree') : null,
          h('a', { href: '#runs/' + encodeURIComponent('h:' + hd.id) }, 'Runs')) : null);
    });
    const view = h('div', {}, h('h1', {}, 'Organisation'),
      o.truncated ? h('p', { class: 'stale' }, 'Showing the first ' + o.cards.length + ' handlers only.') : null,
      h('div', { class: 'cards' }, cards));
    // Bars: widths set through the CSSOM (the CSP forbids style attributes).
    for (const d of view.querySelectorAll('[data-pct]')) d.style.width = d.dataset.pct + '%';
    return view;
  },
};

// Outcomes: a layered layout (longest path from the root), one row of
// boxes per layer, edges as lines; a click opens the outcome's history.
PAGES.outcomes = {
  kinds: ['outcome', 'handler'],
  async render(arg) {
    const t = await api('outcomes');
    const layer = new Map([[t.root, 0]]);
    const kids = new Map();
    for (const [p, c] of t.edges) { if (!kids.has(p)) kids.set(p, []); kids.get(p).push(c); }
    // Longest-path layering, bounded by the node count (a DAG).
    for (let changed = true, i = 0; changed && i < t.outcomes.length + 1; i++) {
      changed = false;
      for (const [p, c] of t.edges) {
        if (layer.has(p) && (layer.get(c) === undefined || layer.get(c) < layer.get(p) + 1)) { layer.set(c, layer.get(p) + 1); changed = true; }
      }
    }
    const rows = [];
    for (const o of t.outcomes) { const l = layer.get(o.id) || 0; (rows[l] = rows[l] || []).push(o); }
    const W = 170, H = 34, GX = 20, GY = 40;
    const pos = new Map();
    rows.forEach((r, y) => r.forEach((o, x) => pos.set(o.id, { x: GX + x * (W + GX), y: GY / 2 + y * (H + GY) })));
    const width = Math.max(400, ...rows.map((r) => GX + r.length * (W + GX)));
    const height = rows.length * (H + GY) + GY;
    const g = svg('svg', { class: 'dag', width, height, viewBox: `0 0 ${width} ${height}` });
    for (const [p, c] of t.edges) {
      const a = pos.get(p), b = pos.get(c);
      if (a && b) g.append(svg('line', { x1: a.x + W / 2, y1: a.y + H, x2: b.x + W / 2, y2: b.y }));
    }
    for (const o of t.outcomes) {
      const p = pos.get(o.id);
      const label = o.title.length > 26 ? o.title.slice(0, 25) + '…' : o.title;
      g.append(svg('g', { class: 's-' + o.status, 'data-outcome': o.id, onclick: () => { location.hash = 'outcomes/' + o.id; } },
        svg('title', {}, o.title),
        svg('rect', { x: p.x, y: p.y, width: W, height: H, rx: 4 }),
        svg('text', { x: p.x + 6, y: p.y + 14 }, label),
        svg('text', { x: p.x + 6, y: p.y + 28, class: 'muted' }, o.status)));
    }
    const legend = h('p', { class: 'legend' }, ['open', 'blocked', 'completion_requested', 'completed', 'closed'].map((s) => h('span', { class: 'lg-' + s }, '■ ', s)));
    const view = h('div', {}, h('h1', {}, 'Outcomes'), legend,
      t.truncated ? h('p', { class: 'stale' }, 'More outcomes exist than shown.') : null, g);
    if (arg) {
      const o = await api('outcomes/' + encodeURIComponent(arg));
      view.append(h('h2', {}, 'History of ', o.outcome.title),
        h('p', {}, o.outcome.status, ' · ', o.outcome.description),
        table(['When', 'Action', 'By', 'Detail'], o.history.map((e) => h('tr', {},
          h('td', {}, when(e.at)), h('td', {}, e.action), h('td', {}, e.handler ? short(e.handler) : 'user/Agency'), h('td', {}, e.detail))), 'no history'));
    }
    return view;
  },
};

PAGES.runs = {
  kinds: ['agent', 'tool', 'model_call', 'mail'],
  async render(arg) {
    if (arg && !arg.startsWith('h:')) return runDetail(arg);
    const runs = await api('runs' + (arg ? '?handler=' + encodeURIComponent(arg.slice(2)) : ''));
    return h('div', {}, h('h1', {}, 'Runs'), table(['Agent', 'Handler', 'Started', 'Runtime', 'Ended', 'Tools', 'Tokens'],
      runs.map((r) => h('tr', { 'data-agent': r.agent },
        h('td', {}, h('a', { href: '#runs/' + r.agent }, short(r.agent))),
        h('td', { class: 'mono' }, short(r.handler)),
        h('td', {}, when(r.started_at)),
        h('td', {}, r.runtime || 'attached'),
        h('td', {}, r.live ? h('span', { class: 'badge live' }, 'live') : (r.normal === false ? h('span', { class: 'badge failed' }, r.ended_how || 'failed') : (r.end_reason || ''))),
        h('td', {}, r.tool_calls ?? ''),
        h('td', {}, (r.input_tokens ?? 0) + (r.output_tokens ?? 0)))), 'No runs yet.'));
  },
};

function cut(text, max) {
  const s = typeof text === 'string' ? text : JSON.stringify(text);
  return s.length > max ? s.slice(0, max) + '… (' + (s.length - max) + ' more characters)' : s;
}

// One transcript line, readable: the built-in loop's (`event`) or Claude
// Code's stream-json (`type`, content blocks); all of it as text.
function replayEvent(e) {
  const head = e.event || [e.type, e.subtype].filter(Boolean).join(' ') || (e.unparsed !== undefined ? 'unparsed' : 'event');
  const blocks = e.message && Array.isArray(e.message.content) ? e.message.content : null;
  let body;
  if (blocks) {
    body = blocks.map((b) => b.type === 'text' ? b.text
      : b.type === 'tool_use' ? '→ ' + b.name + ' ' + cut(b.input, 600)
      : b.type === 'tool_result' ? '← ' + cut(Array.isArray(b.content) ? b.content.map((c) => c.text || '').join('') : b.content, 400)
      : cut(b, 400)).join('\n');
  } else {
    const rest = Object.assign({}, e);
    delete rest.event; delete rest.type; delete rest.subtype;
    body = e.unparsed !== undefined ? e.unparsed : cut(rest, 600);
  }
  return h('div', { class: 'replay' }, h('span', { class: 'kind' }, head), h('pre', {}, body));
}

async function runDetail(agent) {
  const d = await api('runs/' + encodeURIComponent(agent));
  const r = d.run;
  const view = h('div', {}, h('h1', {}, 'Run ', short(r.agent)),
    h('p', {}, 'handler ', h('span', { class: 'mono' }, r.handler), ' · started ', when(r.started_at),
      ' · ', r.live ? 'live' : ('ended ' + when(r.ended_at) + ' (' + (r.ended_how || r.end_reason || 'normally') + ')'),
      ' · tokens ', String((r.input_tokens ?? 0) + (r.output_tokens ?? 0)), ' · tool calls ', String(r.tool_calls ?? 0)),
    h('h2', {}, 'Timeline'),
    table(['When', 'Kind', 'What'], d.timeline.map((e) => h('tr', { 'data-kind': e.kind },
      h('td', {}, when(e.at)), h('td', { class: 'mono' }, e.kind), h('td', {}, e.summary))), 'No events.'));
  const tr = h('div', {}, h('h2', {}, 'Transcript (read-only)'));
  try {
    const t = await api('runs/' + encodeURIComponent(agent) + '/transcript');
    tr.append(t.events.length ? h('div', {}, t.events.map(replayEvent)) : h('p', { class: 'empty' }, 'empty'));
  } catch (err) { tr.append(h('p', { class: 'muted' }, err.message)); }
  const lg = h('div', {}, h('h2', {}, 'Log'));
  try {
    const l = await api('runs/' + encodeURIComponent(agent) + '/log');
    lg.append(!l.captured ? h('p', { class: 'empty' }, 'no output captured') : l.text ? h('pre', {}, l.text) : h('p', { class: 'empty' }, 'no output'));
  } catch (err) { lg.append(h('p', { class: 'muted' }, err.message)); }
  view.append(h('div', { class: 'split' }, tr, lg));
  return view;
}

PAGES.costs = {
  kinds: ['model_call', 'budget'],
  async render() {
    const c = await api('costs');
    const rows = [];
    const walk = (n, d) => {
      rows.push(h('tr', {}, h('td', { class: 'mono' }, '  '.repeat(d), short(n.handler)), h('td', {}, n.status),
        h('td', {}, String(n.self.calls)), h('td', {}, String(tokens(n.self))), h('td', {}, usd(n.self.cost_micro_usd)),
        h('td', {}, String(n.subtree.calls)), h('td', {}, String(tokens(n.subtree))), h('td', {}, usd(n.subtree.cost_micro_usd)),
        h('td', {}, n.subtree.unpriced_calls ? n.subtree.unpriced_calls + ' unpriced' : '')));
      n.children.forEach((k) => walk(k, d + 1));
    };
    walk(c.tree, 0);
    const brk = (list) => table(['', 'Calls', 'Input', 'Output', 'Cost'], list.map((r) => h('tr', {},
      h('td', {}, r.key), h('td', {}, String(r.calls)), h('td', {}, String(r.input_tokens)), h('td', {}, String(r.output_tokens)), h('td', {}, usd(r.cost_micro_usd)))), 'No model calls.');
    return h('div', {}, h('h1', {}, 'Costs'),
      h('h2', {}, 'Per handler (self and subtree)'),
      table(['Handler', 'Status', 'Calls', 'Tokens', 'Cost', 'Subtree calls', 'Subtree tokens', 'Subtree cost', ''], rows),
      h('div', { class: 'split' }, h('div', {}, h('h2', {}, 'Per model'), brk(c.breakdown.by_model)),
        h('div', {}, h('h2', {}, 'Per day (UTC)'), brk(c.breakdown.by_day))),
      h('p', { class: 'muted' }, 'Per model and per day from the newest ', String(c.breakdown.calls), ' metered calls in the event log.'));
  },
};

// A line diff (longest common subsequence), for two versions of a file.
function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  if (x.length * y.length > 4e6) return [['!', 'files too large to diff here']];
  const m = x.length, n = y.length;
  const L = Array.from({ length: m + 1 }, () => new Uint32Array(n + 1));
  for (let i = m - 1; i >= 0; i--) for (let j = n - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < m && j < n) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) out.push(['-', x[i++]]); else out.push(['+', y[j++]]);
  }
  while (i < m) out.push(['-', x[i++]]);
  while (j < n) out.push(['+', y[j++]]);
  return out;
}

PAGES.kb = {
  kinds: ['kb'],
  async render(arg) {
    const files = await api('kb');
    const view = h('div', {}, h('h1', {}, 'Knowledge Base'), table(['File', 'Kind', 'Versions', 'Your level'],
      files.map((f) => h('tr', {}, h('td', {}, h('a', { href: '#kb/' + f.id }, f.description || f.id)), h('td', {}, f.kind),
        h('td', {}, String(f.latest_version)), h('td', {}, f.level))), 'No files.'));
    if (!arg) return view;
    const versions = await api('kb/' + encodeURIComponent(arg) + '/history');
    const pick = (v) => h('select', { 'aria-label': 'version' }, versions.map((x) => h('option', { value: x.version, selected: x.version === v ? 'selected' : null }, 'v' + x.version + ' · ' + when(x.created_at))));
    const last = versions.length ? versions[versions.length - 1].version : 1;
    const a = pick(Math.max(1, last - 1)), b = pick(last);
    const out = h('div', { class: 'diff' });
    const show = async () => {
      const [va, vb] = await Promise.all([api('kb/' + arg + '/versions/' + a.value), api('kb/' + arg + '/versions/' + b.value)]);
      out.replaceChildren(...lineDiff(va.text, vb.text).map(([op, line]) => h('div', { class: op === '+' ? 'add' : op === '-' ? 'del' : '' }, op + ' ' + line)));
    };
    a.addEventListener('change', show); b.addEventListener('change', show);
    view.append(h('h2', {}, 'Versions'), h('p', {}, 'Compare ', a, ' with ', b), out);
    await show();
    return view;
  },
};

PAGES.mail = {
  kinds: ['mail'],
  async render() {
    const msgs = await api('mail');
    return h('div', {}, h('h1', {}, 'Mail to you'), table(['When', 'From', 'Subject', 'Message'],
      msgs.map((m) => h('tr', { 'data-message': m.id }, h('td', {}, when(m.created_at)),
        h('td', { class: 'mono' }, typeof m.from === 'string' ? m.from : JSON.stringify(m.from)), h('td', {}, m.subject || ''),
        h('td', {}, h('pre', { class: 'body' }, m.body ?? ('(' + (m.body_size ?? '?') + ' bytes: read it in the KB)'))))), 'No mail.'));
  },
};

PAGES.orgs = {
  kinds: ['agency', 'handler'],
  async render() {
    const orgs = await api('orgs');
    return h('div', {}, h('h1', {}, 'Organisations'), table(['Name', 'Executive', 'Applied', 'State', 'Agents'],
      orgs.map((o) => h('tr', {}, h('td', {}, o.name), h('td', { class: 'mono' }, short(o.executive)), h('td', {}, when(o.applied_at)),
        h('td', {}, o.retired_at ? 'down' : (o.paused ? 'paused: ' + o.paused.reason : 'up')), h('td', {}, String(o.agents.length)))), 'No organisations applied.'));
  },
};

PAGES.approvals = {
  kinds: ['approval'],
  async render() {
    const all = await api('approvals');
    return h('div', {}, h('h1', {}, 'Approvals history'), table(['#', 'Asked', 'Tool', 'Arguments', 'Status', 'Decided'],
      all.map((a) => h('tr', { 'data-approval': a.id }, h('td', {}, String(a.id)), h('td', {}, when(a.created_at)), h('td', {}, a.tool),
        h('td', {}, h('pre', {}, a.args)), h('td', {}, a.status + (a.always ? ' (always)' : '') + (a.deny_reason ? ': ' + a.deny_reason : '')),
        h('td', {}, when(a.decided_at)))), 'No approval requests.'));
  },
};
