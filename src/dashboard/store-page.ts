/**
 * The dashboard's page in store mode: search and filters over the error
 * store, a chart of failures per minute per group, failure groups with
 * their retry history, keyset-paged entries, each entry in full, bulk
 * retries at a rate and edit-and-retry. Like the in-place page it carries
 * no data in its markup, runs only its own nonce'd script, and puts every
 * value into the DOM as text.
 */
import { STYLE } from './page.js';
import { CHARTS_SCRIPT, CHARTS_SECTION, CHARTS_STYLE } from './charts-page.js';
import { PAGE_HELPERS } from './page-helpers.js';

/**
 * The HTML of the store-mode page, with the charts section when the
 * dashboard takes charts. `nonce` and `csrfToken` are base64url, safe in
 * attributes as they are.
 */
export function renderStorePage(nonce: string, csrfToken: string, charts: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="redeliver-csrf" content="${csrfToken}">
<title>redeliver dashboard</title>
<style nonce="${nonce}">${STYLE}${STORE_STYLE}${charts ? CHARTS_STYLE : ''}</style>
</head>
<body>
<header>
  <h1>redeliver</h1>
  <span id="store-name" class="muted"></span>
  <span class="spacer"></span>
  <span id="waiting" class="muted" data-testid="waiting"></span>
  <span id="live-state" class="muted small"></span>
</header>
<p id="status" role="status" aria-live="polite"></p>
<main>${charts ? CHARTS_SECTION : ''}
<form id="filters" class="filters" autocomplete="off">
  <input id="f-text" type="search" placeholder="Search error message, error name, message id, key" data-testid="search" size="40">
  <label>Group <select id="f-group" data-testid="filter-group"><option value="">any</option></select></label>
  <label>Error <input id="f-errorName" size="14" placeholder="TypeError"></label>
  <label>Failed on queue <input id="f-originalQueue" size="12"></label>
  <label>Endpoint <input id="f-endpoint" size="12"></label>
  <label>Error queue <input id="f-errorQueue" size="10"></label>
  <label>Status <select id="f-status" data-testid="filter-status">
    <option value="failed">waiting</option><option value="retrying">retrying</option><option value="retried">retried</option>
    <option value="replaced">replaced</option><option value="deleted">deleted</option><option value="any">any</option></select></label>
  <label>From <input id="f-since" type="datetime-local"></label>
  <label>To <input id="f-until" type="datetime-local"></label>
  <label>Sort <select id="f-sort"><option value="failed-desc">newest first</option><option value="failed-asc">oldest first</option></select></label>
  <button id="f-clear" type="button">Clear</button>
</form>
<section id="chart-panel">
  <h2>Failures per minute <select id="range" data-testid="chart-range"><option value="hour">last hour</option><option value="day">last day</option></select></h2>
  <div id="chart" data-testid="chart"></div>
  <div id="legend" class="legend"></div>
</section>
<section id="jobs-panel" hidden>
  <h2>Retries</h2>
  <div id="jobs"></div>
</section>
<section id="groups-panel">
  <h2>Failure groups</h2>
  <div id="groups"></div>
</section>
<section id="entries-panel">
  <h2>Entries <span id="entries-title" class="muted small"></span></h2>
  <div class="actions">
    <button id="retry-filtered" type="button" class="primary" data-testid="retry-filtered">Retry filtered&#8230;</button>
    <button id="delete-filtered" type="button" class="danger" data-testid="delete-filtered">Delete filtered&#8230;</button>
    <span id="live-note" class="muted small"></span>
  </div>
  <div id="entries"></div>
  <div class="pager">
    <button id="prev" type="button">&#8249; Previous</button>
    <span id="page-info" class="muted" data-testid="page-info"></span>
    <button id="next" type="button" data-testid="next-page">Next &#8250;</button>
  </div>
</section>
<section id="detail-panel" hidden>
  <h2>Entry <span id="detail-title" class="mono small"></span></h2>
  <div class="actions">
    <button id="detail-retry" type="button" class="primary" data-testid="detail-retry">Retry</button>
    <button id="detail-edit" type="button" data-testid="detail-edit">Edit and retry&#8230;</button>
    <button id="detail-delete" type="button" class="danger">Delete</button>
    <button id="detail-close" type="button">Close</button>
  </div>
  <div id="detail"></div>
</section>
</main>
<dialog id="retry-dialog" data-testid="retry-dialog">
  <h3 id="retry-title"></h3>
  <p id="retry-count" class="muted"></p>
  <label>Messages per second <input id="retry-rate" type="number" min="1" max="10000" value="50" data-testid="retry-rate"></label>
  <div class="actions"><button id="retry-start" type="button" class="primary" data-testid="retry-start">Start</button><button id="retry-cancel" type="button">Cancel</button></div>
</dialog>
<dialog id="edit-dialog" data-testid="edit-dialog">
  <h3>Edit and retry <span id="edit-title" class="mono small"></span></h3>
  <label>Body<textarea id="edit-body" rows="12" cols="80" data-testid="edit-body"></textarea></label>
  <label>Headers (JSON object of names to strings; they replace the entry's headers)<textarea id="edit-headers" rows="6" cols="80" data-testid="edit-headers"></textarea></label>
  <p id="edit-error" class="error-text"></p>
  <div class="actions"><button id="edit-send" type="button" class="primary" data-testid="edit-send">Send</button><button id="edit-cancel" type="button">Cancel</button></div>
</dialog>
<script nonce="${nonce}">${storeScript(charts)}</script>
</body>
</html>`;
}

const STORE_STYLE = `
.filters { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin: 14px 0 6px; font-size: 13px; }
.filters input, .filters select, dialog input, dialog textarea, h2 select { font: inherit; font-size: 13px; background: var(--bg); color: var(--fg); border: 1px solid var(--line); border-radius: 6px; padding: 2px 6px; }
#chart svg { display: block; width: 100%; max-width: 1100px; height: 170px; background: var(--card); border: 1px solid var(--line); border-radius: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; margin-top: 6px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
dialog { background: var(--bg); color: var(--fg); border: 1px solid var(--line); border-radius: 8px; min-width: 420px; }
dialog label { display: block; margin: 8px 0; }
dialog textarea { display: block; width: 100%; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.job { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px; margin-bottom: 6px; }
.job progress { width: 260px; vertical-align: middle; margin: 0 8px; }
`;

/*
 * The page script. It never assigns markup: every value goes through text
 * nodes or textContent, SVG included. State-changing calls send the CSRF
 * token from the page's meta tag in a header. With `charts` it runs the
 * charts section's script too.
 */
function storeScript(charts: boolean): string {
  return `
'use strict';
(() => {
${PAGE_HELPERS}${charts ? CHARTS_SCRIPT : ''}
  const SVG = 'http://www.w3.org/2000/svg';
  const COLORS = ['#1f6feb', '#c93c37', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0a7c86', '#6e7781'];
  const PAGE = 50;
  const HEAVY_MS = 10000;
  const FILTER_FIELDS = ['text', 'group', 'errorName', 'originalQueue', 'endpoint', 'errorQueue', 'status', 'since', 'until'];
  const state = { after: null, back: [], next: null, total: 0, rows: new Map(), groups: [], cursor: null, entry: null, retrySelection: null, fresh: 0, polling: false, stale: false, heavyAt: 0 };

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const k of Object.keys(attrs || {})) node.setAttribute(k, String(attrs[k]));
    for (const child of children) node.append(typeof child === 'object' ? child : String(child));
    return node;
  }
  function pill(s) { return el('span', { className: 'pill' + (s === 'failed' ? ' bad' : s === 'retried' || s === 'replaced' ? ' ok' : s === 'retrying' ? ' warn' : ''), testid: 'entry-status' }, s === 'failed' ? 'waiting' : s); }

  const q = (params) => {
    const out = new URLSearchParams();
    for (const k of Object.keys(params)) if (params[k] !== undefined && params[k] !== null && params[k] !== '') out.set(k, String(params[k]));
    return out.toString();
  };

  // ---- filters ----
  function filter() {
    const f = {};
    for (const name of FILTER_FIELDS) {
      const input = $('f-' + name);
      let value = input.value.trim();
      if ((name === 'since' || name === 'until') && value) value = new Date(value).toISOString();
      if (value) f[name] = value;
    }
    return f;
  }
  function without(f, ...names) { const copy = Object.assign({}, f); for (const n of names) delete copy[n]; return copy; }
  let typing;
  function filtersChanged() {
    clearTimeout(typing);
    typing = setTimeout(() => { state.after = null; state.back = []; void refreshAll(); }, 250);
  }
  for (const name of FILTER_FIELDS.concat(['sort'])) {
    $('f-' + name).addEventListener(name === 'text' ? 'input' : 'change', filtersChanged);
  }
  $('filters').addEventListener('submit', (e) => { e.preventDefault(); filtersChanged(); });
  $('f-clear').addEventListener('click', () => {
    for (const name of FILTER_FIELDS) $('f-' + name).value = name === 'status' ? 'failed' : '';
    filtersChanged();
  });
  $('range').addEventListener('change', () => void loadChart());

  // ---- summary ----
  async function loadSummary() {
    const s = await api('api/summary');
    $('store-name').textContent = 'store ' + s.store;
    $('waiting').textContent = num(s.failed) + ' waiting' + (s.byErrorQueue.length > 1 ? ' (' + s.byErrorQueue.map((x) => x.errorQueue + ' ' + num(x.failed)).join(', ') + ')' : '');
    return s;
  }

  // ---- chart ----
  async function loadChart() {
    let r;
    try { r = await api('api/failure-rate?' + q(Object.assign({ range: $('range').value }, without(filter(), 'status', 'since', 'until')))); } catch (e) { status('Could not read the failure rate: ' + e.message, true); return; }
    const W = 1100, H = 170, pad = 22;
    const n = r.series.length ? r.series[0].counts.length : (r.range === 'day' ? 1440 : 60);
    const totals = new Array(n).fill(0);
    for (const s of r.series) s.counts.forEach((c, i) => { totals[i] += c; });
    const max = Math.max(1, ...totals);
    const bw = (W - pad) / n;
    const chart = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'failures per minute per group' });
    chart.append(svg('text', { x: 2, y: 12, 'font-size': 10, fill: 'currentColor' }, String(max)));
    chart.append(svg('text', { x: 2, y: H - 4, 'font-size': 10, fill: 'currentColor' }, '0'));
    const base = new Array(n).fill(0);
    r.series.forEach((s, k) => {
      s.counts.forEach((c, i) => {
        if (c === 0) return;
        const h = (c / max) * (H - pad);
        const y = H - 6 - base[i] - h;
        base[i] += h;
        const when = new Date(Date.parse(r.since) + i * r.bucketMs).toISOString();
        chart.append(svg('rect', { x: (pad + i * bw).toFixed(2), y: y.toFixed(2), width: Math.max(0.5, bw - (n > 200 ? 0 : 1)).toFixed(2), height: h.toFixed(2), fill: COLORS[k % COLORS.length], 'data-testid': 'chart-bar', 'data-group': s.signature },
          svg('title', {}, time(when) + ': ' + c + ' \\u00d7 ' + s.errorName)));
      });
    });
    $('chart').replaceChildren(chart);
    $('legend').replaceChildren(...r.series.map((s, k) => {
      const sw = el('span', { className: 'swatch' });
      sw.style.background = COLORS[k % COLORS.length];
      return el('span', { testid: 'chart-legend', data: { group: s.signature } }, sw, s.errorName + ': ' + (s.message || '(no message)') + ' (' + num(s.total) + ')');
    }));
    if (r.series.length === 0) $('legend').replaceChildren(el('span', { className: 'muted' }, 'No failures in this range.'));
  }

  // ---- groups ----
  async function loadGroups() {
    let data;
    try { data = await api('api/groups?' + q(without(filter(), 'group'))); } catch (e) { status('Could not read the groups: ' + e.message, true); return; }
    state.groups = data.groups;
    const chosen = $('f-group').value;
    $('f-group').replaceChildren(el('option', null, 'any'), ...data.groups.map((g) => {
      const o = el('option', null, g.signature.errorName + ': ' + g.signature.message + ' (' + g.count + ')');
      o.value = g.signature.id;
      return o;
    }));
    $('f-group').firstChild.value = '';
    $('f-group').value = data.groups.some((g) => g.signature.id === chosen) ? chosen : '';
    if (chosen && $('f-group').value !== chosen) { const o = el('option', null, chosen); o.value = chosen; $('f-group').append(o); $('f-group').value = chosen; }
    const rows = data.groups.map((g) => el('tr', { className: 'clickable' + (g.signature.id === chosen ? ' selected' : ''), testid: 'group-row', data: { group: g.signature.id }, onclick: () => showGroup(g) },
      el('td', null, g.signature.errorName),
      el('td', { className: 'wrap' }, g.signature.message || '(no message)'),
      el('td', null, g.signature.reason),
      el('td', { className: 'num', testid: 'group-count' }, num(g.count)),
      el('td', { className: 'num', testid: 'group-retried' }, num(g.retried)),
      el('td', { className: 'num', testid: 'group-handled' }, num(g.handledAfterRetry)),
      el('td', { className: 'num', testid: 'group-failed-again' }, num(g.failedAgainAfterRetry)),
      el('td', { className: 'mono' }, time(g.firstFailedAt)),
      el('td', { className: 'mono' }, time(g.lastFailedAt)),
      el('td', null, el('div', { className: 'actions' },
        button('Show', '', () => showGroup(g), 'show-group'),
        button('Retry group\\u2026', 'primary', () => openRetry(Object.assign(without(filter(), 'group'), { group: g.signature.id }), 'Retry group ' + g.signature.errorName), 'retry-group'),
        button('Delete group\\u2026', 'danger', () => deleteSelection(Object.assign(without(filter(), 'group'), { group: g.signature.id })), 'delete-group')))));
    const cols = [{ label: 'Error' }, { label: 'Message (normalised)' }, { label: 'Reason' }, { label: 'Count', num: true }, { label: 'Retried', num: true }, { label: 'Handled after retry', num: true }, { label: 'Failed again', num: true }, { label: 'First failed' }, { label: 'Last failed' }, { label: '' }];
    $('groups').replaceChildren(table(cols, rows, 'No entries match. \\u2714'));
  }
  function showGroup(g) { $('f-group').value = g.signature.id; state.after = null; state.back = []; void refreshAll(); }

  // ---- entries ----
  function entryRow(m) {
    return el('tr', { className: 'clickable', testid: 'entry-row', data: { key: m.key }, onclick: () => showEntry(m.key) },
      el('td', { className: 'mono' }, time(m.failedAt)),
      el('td', { className: 'mono' }, m.messageId),
      el('td', null, m.errorName),
      el('td', { className: 'wrap', testid: 'entry-message' }, m.message),
      el('td', { className: 'mono' }, m.originalQueue),
      el('td', null, m.endpoint),
      el('td', null, pill(m.status)),
      el('td', { className: 'num' }, m.retriedCount));
  }
  async function loadEntries() {
    let data;
    try { data = await api('api/entries?' + q(Object.assign(filter(), { sort: $('f-sort').value, limit: PAGE, after: state.after }))); } catch (e) { status('Could not read the entries: ' + e.message, true); return; }
    state.total = data.total;
    state.next = data.next;
    if (state.cursor === null) state.cursor = data.cursor;
    state.rows = new Map();
    const rows = data.entries.map((m) => { const r = entryRow(m); state.rows.set(m.key, r); return r; });
    $('entries').replaceChildren(table([{ label: 'Failed at' }, { label: 'Message id' }, { label: 'Error' }, { label: 'Message' }, { label: 'Failed on' }, { label: 'Endpoint' }, { label: 'Status' }, { label: 'Retried', num: true }], rows, 'No entries match.'));
    // How long the first page took from navigation, for the browser's performance timeline.
    if (rows.length > 0 && performance.getEntriesByName('redeliver:first-entry-row').length === 0) performance.mark('redeliver:first-entry-row');
    const first = state.back.length * PAGE;
    $('page-info').textContent = (data.entries.length ? num(first + 1) + '\\u2013' + num(first + data.entries.length) : '0') + ' of ' + num(data.total);
    $('entries-title').textContent = num(data.total) + ' match';
    $('prev').disabled = state.back.length === 0;
    $('next').disabled = !data.next;
    state.fresh = 0;
    $('live-note').replaceChildren();
  }
  $('next').addEventListener('click', () => { if (!state.next) return; state.back.push(state.after); state.after = state.next; void loadEntries(); });
  $('prev').addEventListener('click', () => { if (state.back.length === 0) return; state.after = state.back.pop(); void loadEntries(); });

  // ---- one entry ----
  async function showEntry(key) {
    let d;
    try { d = await api('api/entries/' + encodeURIComponent(key)); } catch (e) { status('Could not read the entry: ' + e.message, true); return; }
    state.entry = d;
    $('detail-panel').hidden = false;
    $('detail-title').textContent = d.entry.messageId;
    const f = d.failure, s = d.store;
    const dl = (pairs, testid) => { const x = el('dl', { testid }); for (const [k, v] of pairs) x.append(el('dt', null, k), el('dd', null, v === null || v === undefined || v === '' ? '\\u2014' : String(v))); return x; };
    const facts = dl([['Status', d.entry.status === 'failed' ? 'waiting' : d.entry.status], ['Reason', f.reason], ['Error', f.errorName], ['Failed at', time(f.at)], ['Failed on queue', f.queue], ['Endpoint', f.endpoint], ['Host', f.host],
      ['Attempts', f.attempts], ['Signature', d.signature.id], ['Error queue', d.entry.errorQueue], ['Key', d.entry.key]], 'detail-facts');
    const history = dl([['Ingested', time(s.ingestedAt)], ['Sent back before it failed', s.replayCount], ['Retried from the store', s.retriedCount + ' time(s)'], ['Last retried', s.lastRetriedAt ? time(s.lastRetriedAt) + ' by ' + s.lastRetriedBy + ' to ' + s.retriedTo : null],
      ['Outcome', s.outcome ? s.outcome + ' at ' + time(s.outcomeAt) : null],
      ...(d.entry.status === 'deleted' ? [['Deleted', s.deletedAt || s.deletedBy ? (s.deletedAt ? time(s.deletedAt) : '') + (s.deletedBy ? ' by ' + s.deletedBy : '') : null]] : []),
      ...d.edits.map((e) => ['Edited', time(e.at) + ' by ' + e.by + ', sent to ' + e.sentTo + '; body ' + e.bodySizeBefore + ' \u2192 ' + e.bodySizeAfter + ' bytes' + (e.changedHeaders.length ? '; headers changed: ' + e.changedHeaders.join(', ') : '')])], 'store-history');
    const occurrences = d.occurrences.map((o) => el('tr', { className: 'clickable' + (o.key === d.entry.key ? ' selected' : ''), onclick: () => showEntry(o.key) },
      el('td', { className: 'mono' }, time(o.failedAt)), el('td', null, o.errorName), el('td', { className: 'wrap' }, o.message), el('td', null, pill(o.status)), el('td', null, o.outcome || '\\u2014')));
    const attempts = d.history.map((h) => el('tr', null, el('td', { className: 'mono' }, time(h.at)), el('td', { className: 'num' }, h.delayedAttempt), el('td', { className: 'num' }, h.immediateAttempt), el('td', null, h.errorName), el('td', { className: 'wrap' }, h.message)));
    const headers = d.headers.map((p) => el('tr', null, el('td', { className: 'mono' }, p[0]), el('td', { className: 'mono wrap' }, p[1])));
    const b = d.body;
    let bodyText = b.text;
    if (b.encoding === 'utf8' && !b.truncated) { try { bodyText = JSON.stringify(JSON.parse(b.text), null, 2); } catch (e) { bodyText = b.text; } }
    const bodyNote = (b.encoding === 'hex' ? 'Binary (not UTF-8), shown as hex. ' : '') + (b.truncated ? 'Showing the first ' + num(b.shownBytes) + ' of ' + num(b.size) + ' bytes.' : num(b.size) + ' bytes.');
    $('detail').replaceChildren(facts,
      el('h3', null, 'In the store'), history,
      el('h3', null, 'Every failure of this message'),
      table([{ label: 'Failed at' }, { label: 'Error' }, { label: 'Message' }, { label: 'Status' }, { label: 'Outcome' }], occurrences, 'Only this one.'),
      el('h3', null, 'Error message'), el('pre', { testid: 'detail-message' }, f.message || '(none)'),
      el('h3', null, 'Stack'), el('pre', { testid: 'detail-stack' }, f.stack || '(none)'),
      ...(d.validationIssues.length ? [el('h3', null, 'Validation issues'), el('ul', { testid: 'detail-validation-issues' }, ...d.validationIssues.map((line) => el('li', { className: 'mono wrap' }, line)))] : []),
      el('h3', null, 'Attempt history'),
      table([{ label: 'At' }, { label: 'Delayed retry', num: true }, { label: 'Immediate attempt', num: true }, { label: 'Error' }, { label: 'Message' }], attempts, 'No history recorded.'),
      el('h3', null, 'Body ', el('span', { className: 'muted small' }, bodyNote)), el('pre', { testid: 'detail-body' }, bodyText),
      el('details', null, el('summary', null, 'Headers (' + headers.length + ')'), table([{ label: 'Name' }, { label: 'Value' }], headers, 'No headers.')));
    const waiting = d.entry.status === 'failed';
    $('detail-retry').disabled = !waiting;
    $('detail-edit').disabled = !waiting || b.encoding !== 'utf8' || b.truncated;
    $('detail-delete').disabled = !waiting;
    $('detail-panel').scrollIntoView({ block: 'nearest' });
  }
  function closeEntry() { state.entry = null; $('detail-panel').hidden = true; }
  $('detail-close').addEventListener('click', closeEntry);

  // ---- delete ----
  async function deleteSelection(f) {
    try {
      const c = await api('api/count?' + q(f));
      if (c.count === 0) { status('Nothing to delete: no waiting entries match.'); return; }
      if (!window.confirm('Delete ' + c.count + ' waiting entries for good? Entries that arrive from now on are not touched.')) return;
      const r = await api('api/delete', { filter: f, maxSeq: c.maxSeq, confirm: c.count });
      status('Deleted ' + num(r.deleted) + ' entries.');
    } catch (e) { status('Delete failed: ' + e.message, true); }
    await refreshAll();
  }
  $('delete-filtered').addEventListener('click', () => void deleteSelection(filter()));
  $('detail-delete').addEventListener('click', async () => {
    if (!state.entry || !window.confirm('Delete this entry for good?')) return;
    try {
      const r = await api('api/delete', { key: state.entry.entry.key });
      status(r.deleted ? 'Deleted.' : 'It was no longer waiting.');
      closeEntry();
    } catch (e) { status('Delete failed: ' + e.message, true); }
    await refreshAll();
  });

  // ---- retries (jobs) ----
  async function openRetry(f, title) {
    let c;
    try { c = await api('api/count?' + q(f)); } catch (e) { status('Could not count the entries: ' + e.message, true); return; }
    state.retrySelection = { filter: f, maxSeq: c.maxSeq };
    $('retry-title').textContent = title;
    $('retry-count').textContent = num(c.count) + ' waiting entries go back to the queues they failed on.';
    $('retry-start').disabled = c.count === 0;
    $('retry-dialog').showModal();
  }
  $('retry-filtered').addEventListener('click', () => void openRetry(filter(), 'Retry the filtered entries'));
  $('detail-retry').addEventListener('click', () => { if (state.entry) void startRetry({ key: state.entry.entry.key }); });
  $('retry-cancel').addEventListener('click', () => $('retry-dialog').close());
  $('retry-start').addEventListener('click', () => {
    const sel = state.retrySelection;
    if (!sel) return;
    state.retrySelection = null;
    $('retry-dialog').close();
    void startRetry({ filter: sel.filter, maxSeq: sel.maxSeq, ratePerSecond: Number($('retry-rate').value) });
  });
  async function startRetry(body) {
    try {
      const job = await api('api/jobs', body);
      status('Retry started.');
      watchJob(job.id);
    } catch (e) { status('Retry failed: ' + e.message, true); }
  }
  function watchJob(id) {
    $('jobs-panel').hidden = false;
    const bar = el('progress', { testid: 'job-progress' });
    const text = el('span', { testid: 'job-text' }, 'starting\\u2026');
    const box = el('div', { className: 'job', testid: 'job', data: { job: id } }, el('span', { className: 'mono' }, id), bar, text);
    $('jobs').prepend(box);
    const tick = async () => {
      let j;
      try { j = await api('api/jobs/' + encodeURIComponent(id)); } catch (e) { text.textContent = 'could not read progress: ' + e.message; setTimeout(tick, 2000); return; }
      bar.max = Math.max(1, j.total);
      bar.value = j.sent + j.failed + j.refused + j.alreadyHandled;
      text.textContent = j.state + ': sent ' + num(j.sent) + ' of ' + num(j.total) + (j.ratePerSecond ? ' at ' + j.ratePerSecond + '/s' : '') + (j.alreadyHandled ? ', ' + num(j.alreadyHandled) + ' already handled' : '')
        + (j.refused ? ', ' + num(j.refused) + ' refused' : '') + (j.failed ? ', ' + num(j.failed) + ' failed' : '') + (j.error ? ' \\u2014 ' + j.error : '');
      box.dataset.state = j.state;
      if (j.done) { void refreshAll(); return; }
      setTimeout(tick, 1000);
    };
    void tick();
  }

  // ---- edit and retry ----
  let editRequest = null;
  $('detail-edit').addEventListener('click', () => {
    const d = state.entry;
    if (!d) return;
    editRequest = { key: d.entry.key, requestId: crypto.randomUUID() };
    $('edit-title').textContent = d.entry.messageId;
    $('edit-body').value = d.body.text;
    const headers = {};
    for (const [name, value] of d.headers) headers[name] = value;
    $('edit-headers').value = JSON.stringify(headers, null, 2);
    $('edit-error').textContent = '';
    $('edit-send').disabled = false;
    $('edit-dialog').showModal();
  });
  $('edit-cancel').addEventListener('click', () => { editRequest = null; $('edit-dialog').close(); });
  $('edit-send').addEventListener('click', async () => {
    const req = editRequest;
    if (!req) return;
    let headers;
    try { headers = JSON.parse($('edit-headers').value || '{}'); } catch (e) { $('edit-error').textContent = 'The headers are not valid JSON: ' + e.message; return; }
    $('edit-send').disabled = true;
    try {
      const r = await api('api/edit-retry', { key: req.key, requestId: req.requestId, body: $('edit-body').value, headers });
      editRequest = null;
      $('edit-dialog').close();
      status((r.duplicate ? 'Already sent' : 'Sent') + ' the edited message to ' + r.sentTo + '.');
      closeEntry();
      await refreshAll();
    } catch (e) {
      $('edit-error').textContent = 'Not sent: ' + e.message;
      $('edit-send').disabled = false;
    }
  });

  // ---- live updates ----
  async function poll() {
    if (state.polling || state.cursor === null) return;
    state.polling = true;
    try {
      let more = true;
      let changed = 0;
      while (more) {
        const c = await api('api/changes?' + q({ cursor: state.cursor }));
        state.cursor = c.cursor;
        more = c.more;
        changed += c.entries.length;
        for (const m of c.entries) {
          const row = state.rows.get(m.key);
          if (row) { const fresh = entryRow(m); row.replaceWith(fresh); state.rows.set(m.key, fresh); }
          else if (m.status === 'failed' && m.retriedCount === 0) state.fresh++;
        }
      }
      $('live-state').textContent = 'live \\u00b7 ' + new Date().toLocaleTimeString();
      if (changed > 0) {
        if (state.fresh > 0) $('live-note').replaceChildren(button(num(state.fresh) + ' new \\u2014 show', '', () => { state.after = null; state.back = []; void loadEntries(); }, 'show-new'));
        state.stale = true;
        await loadSummary();
      }
      // Groups and the chart aggregate the whole store: recomputed at most every HEAVY_MS while entries keep changing.
      if (state.stale && Date.now() - state.heavyAt >= HEAVY_MS) {
        state.stale = false;
        state.heavyAt = Date.now();
        await Promise.all([loadGroups(), loadChart()]);
      }
    } catch (e) {
      $('live-state').textContent = 'live updates paused: ' + e.message;
    } finally { state.polling = false; }
  }

  async function refreshAll() {
    try { await loadSummary(); } catch (e) { status('Could not read the store: ' + e.message, true); }
    state.heavyAt = Date.now();
    await Promise.all([loadEntries(), loadGroups(), loadChart()]);
  }
  // The entries first: the table is what an operator reads first; the aggregates follow.
  void (async () => {
    await loadEntries();
    state.heavyAt = Date.now();
    try { await loadSummary(); } catch (e) { status('Could not read the store: ' + e.message, true); }
    await loadGroups();
    await loadChart();
  })();
  setInterval(() => void poll(), 2000);
})();
`;
}
