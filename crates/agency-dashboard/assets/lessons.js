// The Lessons page: what pipelines learned, each lesson's utility (runs
// that recalled it, were scored, passed, failed), one lesson's history
// and versions with the user's decisions on it, and each pipeline's score
// trend from its recent runs' Gatekeeper scorecards. Built with h() and
// svg() (text set as text, never markup), like every page.
'use strict';

// A decision that needs a reason (reject, retire): a field and a button;
// the button says so when the field is empty rather than sending nothing.
function reasonAction(path, label, placeholder) {
  const verb = label.toLowerCase();
  const input = h('input', { type: 'text', placeholder, 'aria-label': 'reason to ' + verb, 'data-reason': verb });
  return h('span', { class: 'reason-action' }, input, h('button', { 'data-action': verb, onclick: () => {
    if (!input.value.trim()) { showError('give a reason to ' + verb + ' the lesson'); input.focus(); return; }
    act(path, { reason: input.value });
  } }, label));
}

function utility(c) {
  return c.recalled + ' recalled · ' + c.used + ' scored · ' + c.helpful + ' helpful · ' + c.harmful + ' harmful';
}

// The decisions that apply to a lesson in its state (the service checks
// them again).
function lessonActions(l) {
  const base = 'lessons/' + l.id;
  const waiting = ['proposed', 'replaying', 'awaiting_user'].includes(l.state);
  const out = [];
  if (l.state !== 'admitted') {
    out.push(h('button', { class: 'primary', 'data-action': 'approve', onclick: () => act(base + '/approve') }, 'Approve'));
  }
  if (waiting) out.push(reasonAction(base + '/reject', 'Reject', 'why it is wrong'));
  if (l.state !== 'retired' && !waiting) out.push(reasonAction(base + '/retire', 'Retire', 'why to stop recalling it'));
  if (l.version > 1) {
    const pick = h('select', { 'aria-label': 'version to restore', 'data-rollback': 'to' });
    for (let v = l.version - 1; v >= 1; v--) pick.append(h('option', { value: v }, 'version ' + v));
    out.push(h('span', { class: 'reason-action' }, pick, h('button', { 'data-action': 'rollback', onclick: () => act(base + '/rollback', { to: Number(pick.value) }) }, 'Roll back')));
  }
  return out;
}

// One pipeline's trend: a bar per run, oldest on the left, its height the
// total (of 25); red when Correctness or Safety failed (that blocks
// promotion whatever the total). The dashed line is the least total a
// run needs to be recalled as an example.
function trendChart(runs) {
  const H = 100, top = 14, n = runs.length;
  const bw = Math.max(3, Math.min(16, Math.floor(720 / Math.max(1, n)) - 3));
  const width = Math.max(160, 30 + n * (bw + 3));
  const g = svg('svg', { class: 'trend', width, height: H + top + 16, viewBox: `0 0 ${width} ${H + top + 16}`, role: 'img', 'aria-label': 'score trend' });
  const y = (score) => top + H - Math.round(H * Math.min(25, Math.max(0, score)) / 25);
  g.append(svg('line', { class: 'axis', x1: 24, y1: top + H, x2: width, y2: top + H }),
    svg('line', { class: 'threshold', x1: 24, y1: y(15), x2: width, y2: y(15) }),
    svg('text', { x: 0, y: y(25) + 4, class: 'muted' }, '25'),
    svg('text', { x: 0, y: y(15) + 4, class: 'muted' }, '15'),
    svg('text', { x: 6, y: top + H + 4, class: 'muted' }, '0'));
  runs.forEach((r, i) => {
    const ok = r.correctness_pass && r.safety_pass;
    const x = 28 + i * (bw + 3);
    const failed = [!r.correctness_pass ? 'Correctness' : null, !r.safety_pass ? 'Safety' : null].filter(Boolean);
    g.append(svg('g', { class: ok ? 'pass' : 'fail', 'data-run': r.run, 'data-total': r.total },
      svg('title', {}, 'run ' + short(r.run) + ' · ' + when(r.ended_at || r.created_at) + ' · total ' + r.total + '/25 · correctness ' + r.correctness +
        ', verification ' + r.verification + ', safety ' + r.safety + ', clarity ' + r.clarity + ', autonomy ' + r.autonomy +
        (failed.length ? ' · failed: ' + failed.join(', ') : '')),
      svg('rect', { x, y: y(r.total), width: bw, height: Math.max(1, top + H - y(r.total)) }),
      bw >= 12 ? svg('text', { x: x + bw / 2, y: y(r.total) - 3, 'text-anchor': 'middle' }, String(r.total)) : null,
      ok ? null : svg('text', { x: x + bw / 2, y: top + H + 13, 'text-anchor': 'middle', class: 'mark' }, '!')));
  });
  return g;
}

function trends(scores) {
  if (!scores.length) return h('p', { class: 'empty' }, 'No scored runs yet.');
  const by = new Map();
  for (const s of scores) { if (!by.has(s.pipeline)) by.set(s.pipeline, []); by.get(s.pipeline).push(s); }
  const out = [];
  for (const [name, list] of [...by.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const runs = list.slice().reverse(); // oldest first
    const mean = runs.reduce((t, r) => t + r.total, 0) / runs.length;
    const failed = runs.filter((r) => !(r.correctness_pass && r.safety_pass)).length;
    out.push(h('div', { class: 'trend-box', 'data-pipeline': name },
      h('h3', {}, name),
      h('p', { class: 'muted' }, runs.length + ' scored runs · latest ' + runs[runs.length - 1].total + '/25 · mean ' + mean.toFixed(1) +
        (failed ? ' · ' + failed + ' failed Correctness or Safety' : '')),
      trendChart(runs)));
  }
  return h('div', { class: 'trends' }, out,
    h('p', { class: 'legend' }, h('span', { class: 'lg-pass' }, '■ passed'), h('span', { class: 'lg-fail' }, '■ ! Correctness or Safety failed'),
      h('span', { class: 'muted' }, '- - 15: recalled as an example')));
}

async function lessonDetail(id) {
  const l = await api('lessons/' + encodeURIComponent(id));
  return h('div', { class: 'lesson-detail', 'data-lesson': l.id },
    h('h2', {}, 'Lesson: ', l.title),
    h('dl', { class: 'facts' },
      h('dt', {}, 'state'), h('dd', {}, h('span', { class: 'badge s-' + l.state }, l.state), l.reason ? ' ' + l.reason : ''),
      h('dt', {}, 'pipeline'), h('dd', {}, l.pipeline),
      h('dt', {}, 'scope'), h('dd', {}, l.scope.kind + ': ' + l.scope.name),
      h('dt', {}, 'when'), h('dd', { class: 'trigger' }, l.trigger),
      h('dt', {}, 'advice'), h('dd', {}, h('pre', { class: 'advice' }, l.advice)),
      l.counterexample ? [h('dt', {}, 'not when'), h('dd', {}, h('pre', {}, l.counterexample))] : null,
      h('dt', {}, 'version'), h('dd', {}, String(l.version)),
      h('dt', {}, 'utility'), h('dd', {}, utility(l.counters)),
      h('dt', {}, 'from runs'), h('dd', { class: 'mono' }, l.supporting_runs.map(short).join(', ') || '—')),
    h('div', { class: 'actions' }, lessonActions(l)),
    h('h3', {}, 'History'),
    table(['When', 'What', 'Version', 'Run', 'Detail'], l.history.map((e) => h('tr', { 'data-action': e.action },
      h('td', {}, when(e.at)), h('td', {}, e.action), h('td', {}, String(e.version)), h('td', { class: 'mono' }, e.run ? short(e.run) : '—'),
      h('td', {}, h('pre', {}, cut(e.detail, 600))))), 'No history.'),
    h('h3', {}, 'Versions'),
    table(['Version', 'When', 'Content'], l.versions.slice().reverse().map((v) => h('tr', { 'data-version': v.version },
      h('td', {}, String(v.version)), h('td', {}, when(v.at)), h('td', {}, h('pre', {}, cut(v.content, 2000))))), 'No versions.'));
}

PAGES.lessons = {
  kinds: ['lesson', 'pipeline'],
  async render(arg) {
    const [lessons, scores] = await Promise.all([api('lessons'), api('scores')]);
    const rows = lessons.map((l) => h('tr', { 'data-lesson': l.id, class: l.id === arg ? 'selected' : null },
      h('td', {}, h('span', { class: 'badge s-' + l.state }, l.state)),
      h('td', {}, h('a', { href: '#lessons/' + l.id }, l.title)),
      h('td', {}, l.pipeline),
      h('td', {}, l.scope.kind),
      h('td', {}, String(l.version)),
      h('td', { class: 'utility' }, utility(l.counters)),
      h('td', {}, String(l.supporting_runs.length)),
      h('td', {}, ago(l.updated_at))));
    return h('div', {}, h('h1', {}, 'Lessons'),
      arg ? await lessonDetail(arg) : null,
      h('h2', {}, 'Score trend per pipeline'), trends(scores),
      h('h2', {}, 'What pipelines learned'),
      table(['State', 'Lesson', 'Pipeline', 'Scope', 'Version', 'Utility', 'Runs', 'Changed'], rows, 'No lessons yet: a pipeline learns them from its runs.'));
  },
};
