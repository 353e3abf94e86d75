/**
 * The dashboard's single page: inline style and script, allowed by a
 * per-response CSP nonce, and no data in the markup. Everything shown comes
 * from the JSON API and reaches the DOM as text (textContent, text nodes),
 * never as markup: bodies, headers and error messages are untrusted.
 */
import { CHARTS_SCRIPT, CHARTS_SECTION, CHARTS_STYLE } from './charts-page.js';
import { PAGE_HELPERS } from './page-helpers.js';

/**
 * The HTML of the page, with the charts section when the dashboard takes
 * charts. `nonce` and `csrfToken` are base64url, safe in attributes as they
 * are.
 */
export function renderPage(nonce: string, csrfToken: string, charts: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="redeliver-csrf" content="${csrfToken}">
<title>redeliver dashboard</title>
<style nonce="${nonce}">${STYLE}${charts ? CHARTS_STYLE : ''}</style>
</head>
<body>
<header>
  <h1>redeliver</h1>
  <span id="transport" class="muted"></span>
  <span class="spacer"></span>
  <span id="updated" class="muted"></span>
  <button id="refresh" type="button">Refresh</button>
</header>
<p id="status" role="status" aria-live="polite"></p>
<main>${charts ? CHARTS_SECTION : ''}
<section id="live">
  <h2>Live <span class="muted small">refreshed every 2 s</span></h2>
  <div id="error-queues" class="cards"></div>
  <div id="endpoints"></div>
  <div id="depths"></div>
</section>
<section id="groups-panel">
  <h2>Failure groups</h2>
  <p id="groups-note" class="muted small"></p>
  <div id="groups"></div>
</section>
<section id="messages-panel" hidden>
  <h2>Messages <span id="messages-title" class="muted small"></span></h2>
  <div id="messages"></div>
  <div class="pager">
    <button id="prev" type="button">&#8249; Previous</button>
    <span id="page-info" class="muted"></span>
    <button id="next" type="button">Next &#8250;</button>
  </div>
</section>
<section id="detail-panel" hidden>
  <h2>Message <span id="detail-title" class="mono small"></span></h2>
  <div class="actions">
    <button id="detail-retry" type="button" class="primary">Retry</button>
    <button id="detail-delete" type="button" class="danger">Delete</button>
    <button id="detail-close" type="button">Close</button>
  </div>
  <div id="detail"></div>
</section>
</main>
<script nonce="${nonce}">${script(charts)}</script>
</body>
</html>`;
}

/** The page's style sheet; the store-mode page adds its own rules to it. */
export const STYLE = `
:root { color-scheme: light dark; --bg: #fff; --fg: #1b1f24; --muted: #667085; --line: #d8dde3; --card: #f6f8fa; --accent: #1f6feb; --danger: #c93c37; --ok: #1a7f37; --warn: #9a6700; }
@media (prefers-color-scheme: dark) { :root { --bg: #0d1117; --fg: #e6edf3; --muted: #8b949e; --line: #30363d; --card: #161b22; --accent: #4493f8; --danger: #f85149; --ok: #3fb950; --warn: #d29922; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: center; gap: 12px; padding: 10px 20px; border-bottom: 1px solid var(--line); }
header h1 { font-size: 18px; margin: 0; }
.spacer { flex: 1; }
main { padding: 0 20px 40px; }
h2 { font-size: 15px; margin: 22px 0 8px; }
h3 { font-size: 13px; margin: 16px 0 6px; }
.muted { color: var(--muted); }
.small { font-size: 12px; font-weight: normal; }
.mono, pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; overflow: auto; max-height: 360px; white-space: pre-wrap; word-break: break-all; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { word-break: break-word; max-width: 480px; }
tr.selected td { background: color-mix(in srgb, var(--accent) 12%, transparent); }
tr.clickable { cursor: pointer; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; min-width: 150px; }
.card .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .label { font-size: 12px; color: var(--muted); }
button { font: inherit; font-size: 13px; padding: 3px 10px; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; }
button:hover { border-color: var(--accent); }
button:disabled { opacity: .5; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--danger); }
div.actions { white-space: nowrap; display: flex; gap: 6px; }
.pill { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); }
.pill.ok { color: var(--ok); } .pill.warn { color: var(--warn); } .pill.bad { color: var(--danger); }
#status { margin: 8px 20px 0; min-height: 1.4em; }
#status.error, .error-text { color: var(--danger); }
.pager { display: flex; gap: 10px; align-items: center; margin-top: 8px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 4px 0; }
dt { color: var(--muted); } dd { margin: 0; word-break: break-word; }
summary { cursor: pointer; font-size: 13px; font-weight: 600; margin: 16px 0 6px; }
.empty { color: var(--muted); padding: 8px 0; }
`;

/*
 * The page script. It never assigns markup: every value goes through
 * text nodes or textContent. State-changing calls send the CSRF token from
 * the page's meta tag in a header. With `charts` it runs the charts
 * section's script too.
 */
function script(charts: boolean): string {
  return `
'use strict';
(() => {
${PAGE_HELPERS}${charts ? CHARTS_SCRIPT : ''}
  const state = { groups: [], selected: null, offset: 0, limit: 25, total: 0, entry: null, busy: false };

  function replace(id, node) { const host = $(id); host.replaceChildren(node); }

  const q = (params) => new URLSearchParams(params).toString();

  // ---- live counters ----
  async function refreshStats() {
    let s;
    try { s = await api('api/stats'); } catch (e) {
      replace('error-queues', el('p', { className: 'error-text' }, 'Could not read the counters: ' + e.message));
      return;
    }
    $('transport').textContent = s.transport ? 'on ' + s.transport : '';
    $('updated').textContent = 'updated ' + new Date(s.at).toLocaleTimeString();
    const cards = s.errorQueues.map((eq) => el('div', { className: 'card', testid: 'error-queue-card', data: { queue: eq.name } },
      el('div', { className: 'value' }, num(eq.count)),
      el('div', { className: 'label' }, 'in error queue ', el('code', null, eq.name)),
      el('div', { className: 'label' }, num(eq.deadLettersPerMinute) + ' dead-lettered / min')));
    replace('error-queues', el('div', { className: 'cards' }, ...cards));
    if (s.endpoints.length > 0) {
      const rows = s.endpoints.map((e) => el('tr', { testid: 'endpoint-row', data: { endpoint: e.name } },
        el('td', null, e.name), el('td', { className: 'mono' }, e.queue),
        el('td', null, e.running ? el('span', { className: 'pill ok' }, 'running') : el('span', { className: 'pill' }, 'stopped')),
        el('td', { className: 'num' }, num(e.perMinute.handled)),
        el('td', { className: 'num' }, num(e.perMinute.immediateRetries)),
        el('td', { className: 'num' }, num(e.perMinute.delayedRetries)),
        el('td', { className: 'num' }, num(e.perMinute.deadLettered)),
        el('td', { className: 'num' }, num(e.inFlight)),
        el('td', null, backoffText(e.flow)),
        el('td', null, e.flow.rateLimited ? el('span', { className: 'pill bad' }, 'rate limited (' + e.flow.consecutiveFailures + ' failures)') : el('span', { className: 'pill ok' }, 'no')),
        el('td', { className: 'num' }, e.flow.budgetTokens === null || e.flow.budgetTokens === undefined ? '\\u2014' : e.flow.budgetTokens.toFixed(1))));
      const cols = [{ label: 'Endpoint' }, { label: 'Queue' }, { label: 'State' }, { label: 'Handled/min', num: true }, { label: 'Retried now/min', num: true }, { label: 'Retried later/min', num: true }, { label: 'Dead-lettered/min', num: true }, { label: 'In flight', num: true }, { label: 'Consumer backoff' }, { label: 'Rate limit' }, { label: 'Retry budget', num: true }];
      replace('endpoints', el('div', null, el('h3', null, 'Endpoints in this process'), table(cols, rows, '')));
    } else {
      $('endpoints').replaceChildren();
    }
    if (s.queues) {
      const rows = s.queues.map((d) => el('tr', { testid: 'depth-row', data: { queue: d.queue } },
        el('td', { className: 'mono' }, d.queue), el('td', null, d.kind),
        el('td', { className: 'num' }, num(d.ready)), el('td', { className: 'num' }, num(d.delayed)), el('td', { className: 'num' }, num(d.inFlight))));
      replace('depths', el('div', null, el('h3', null, 'Queue depths'),
        table([{ label: 'Queue' }, { label: 'Kind' }, { label: 'Ready', num: true }, { label: 'Delayed', num: true }, { label: 'In flight', num: true }], rows, 'No queues yet.')));
    } else if (s.queuesError) {
      replace('depths', el('p', { className: 'error-text' }, 'Could not read queue depths: ' + s.queuesError));
    } else {
      replace('depths', el('p', { className: 'muted small' }, 'This transport cannot read queue depths.'));
    }
  }
  function backoffText(flow) {
    if (flow.backingOff) return el('span', { className: 'pill bad' }, 'backing off (level ' + flow.backoffCounter + ')');
    if (flow.probing) return el('span', { className: 'pill warn' }, 'probing (level ' + flow.backoffCounter + ')');
    if (flow.backoffCounter > 0) return el('span', { className: 'pill warn' }, 'level ' + flow.backoffCounter);
    return el('span', { className: 'pill ok' }, 'no');
  }

  // ---- groups ----
  async function refreshGroups() {
    let data;
    try { data = await api('api/groups?' + q({ limit: 200 })); } catch (e) { status('Could not read the error queues: ' + e.message, true); return; }
    state.groups = data.groups;
    const notes = data.queues.map((x) => x.errorQueue + ': ' + num(x.scanned) + ' messages' + (x.truncated ? ' (more not read: groups are partial)' : ''));
    $('groups-note').textContent = notes.join(' \\u00b7 ') + (data.total > data.groups.length ? ' \\u00b7 showing ' + data.groups.length + ' of ' + data.total + ' groups' : '');
    const rows = data.groups.map((g) => {
      const selected = state.selected && state.selected.errorQueue === g.errorQueue && state.selected.id === g.signature.id;
      return el('tr', { className: 'clickable' + (selected ? ' selected' : ''), testid: 'group-row', data: { group: g.signature.id, queue: g.errorQueue }, onclick: () => selectGroup(g) },
        el('td', { className: 'mono' }, g.errorQueue),
        el('td', null, g.signature.errorName),
        el('td', { className: 'wrap' }, g.signature.message || '(no message)'),
        el('td', { className: 'wrap mono' }, g.signature.topFrame || '\\u2014'),
        el('td', null, g.signature.reason),
        el('td', { className: 'num', testid: 'group-count' }, num(g.count)),
        el('td', { className: 'mono' }, time(g.firstSeen)),
        el('td', { className: 'mono' }, time(g.lastSeen)),
        el('td', null, el('div', { className: 'actions' },
          button('Messages', '', () => selectGroup(g), 'show-group'),
          button('Retry all', 'primary', () => retryGroup(g), 'retry-group'))));
    });
    const cols = [{ label: 'Error queue' }, { label: 'Error' }, { label: 'Message (normalised)' }, { label: 'Top frame' }, { label: 'Reason' }, { label: 'Count', num: true }, { label: 'First seen' }, { label: 'Last seen' }, { label: '' }];
    replace('groups', table(cols, rows, 'No failed messages. \\u2714'));
    if (state.selected && !data.groups.some((g) => g.errorQueue === state.selected.errorQueue && g.signature.id === state.selected.id)) {
      state.selected = null;
      $('messages-panel').hidden = true;
    }
  }
  function selectGroup(g) {
    state.selected = { errorQueue: g.errorQueue, id: g.signature.id, label: g.signature.errorName + ': ' + g.signature.message };
    state.offset = 0;
    for (const row of document.querySelectorAll('tr[data-testid="group-row"]')) {
      row.classList.toggle('selected', row.dataset.group === g.signature.id && row.dataset.queue === g.errorQueue);
    }
    void loadMessages();
  }

  // ---- messages of a group ----
  async function loadMessages() {
    const sel = state.selected;
    if (!sel) return;
    let data;
    try {
      data = await api('api/entries?' + q({ errorQueue: sel.errorQueue, group: sel.id, offset: state.offset, limit: state.limit }));
    } catch (e) { status('Could not read the messages: ' + e.message, true); return; }
    state.total = data.total;
    $('messages-panel').hidden = false;
    $('messages-title').textContent = sel.errorQueue + ' \\u00b7 ' + sel.label;
    const rows = data.entries.map((m) => el('tr', { className: 'clickable', testid: 'message-row', data: { key: m.key }, onclick: () => showEntry(sel.errorQueue, m.key) },
      el('td', { className: 'mono' }, m.messageId),
      el('td', { className: 'mono' }, time(m.failedAt)),
      el('td', null, m.errorName),
      el('td', { className: 'wrap', testid: 'message-text' }, m.message),
      el('td', null, el('div', { className: 'actions' },
        button('View', '', () => showEntry(sel.errorQueue, m.key), 'view-message'),
        button('Retry', 'primary', () => retryOne(sel.errorQueue, m.key), 'retry-message'),
        button('Delete', 'danger', () => deleteOne(sel.errorQueue, m.key), 'delete-message')))));
    replace('messages', table([{ label: 'Message id' }, { label: 'Failed at' }, { label: 'Error' }, { label: 'Message' }, { label: '' }], rows, 'No messages left in this group.'));
    const first = data.total === 0 ? 0 : data.offset + 1;
    $('page-info').textContent = num(first) + '\\u2013' + num(data.offset + data.entries.length) + ' of ' + num(data.total);
    $('prev').disabled = data.offset === 0;
    $('next').disabled = data.offset + data.entries.length >= data.total;
  }

  // ---- one message ----
  async function showEntry(errorQueue, key) {
    let d;
    try { d = await api('api/entries/' + encodeURIComponent(errorQueue) + '/' + encodeURIComponent(key)); } catch (e) { status('Could not read the message: ' + e.message, true); return; }
    state.entry = { errorQueue, key };
    $('detail-panel').hidden = false;
    $('detail-title').textContent = d.messageId;
    const f = d.failure;
    const facts = [['Reason', f.reason], ['Error', f.errorName], ['Failed at', time(f.at)], ['Failed on queue', f.queue], ['Endpoint', f.endpoint], ['Host', f.host],
      ['Attempts', f.attempts + ' in all (' + (f.immediateAttempts || '0') + ' in the last round, ' + (f.delayedAttempts || '0') + ' delayed retries)'],
      ['Sent back before', f.replayCount || '0'], ['Signature', d.signature.id], ['Error queue', d.errorQueue], ['Key', d.key]];
    const dl = el('dl', null);
    for (const [k, v] of facts) dl.append(el('dt', null, k), el('dd', null, v || '\\u2014'));
    const history = d.history.map((h) => el('tr', null, el('td', { className: 'mono' }, time(h.at)), el('td', { className: 'num' }, h.delayedAttempt), el('td', { className: 'num' }, h.immediateAttempt), el('td', null, h.errorName), el('td', { className: 'wrap' }, h.message)));
    const headers = d.headers.map((pair) => el('tr', null, el('td', { className: 'mono' }, pair[0]), el('td', { className: 'mono wrap' }, pair[1])));
    const b = d.body;
    let bodyText = b.text;
    if (b.encoding === 'utf8' && !b.truncated) {
      try { bodyText = JSON.stringify(JSON.parse(b.text), null, 2); } catch (e) { bodyText = b.text; }
    }
    const bodyNote = (b.encoding === 'hex' ? 'Binary (not UTF-8), shown as hex. ' : '') + (b.truncated ? 'Showing the first ' + num(b.shownBytes) + ' of ' + num(b.size) + ' bytes.' : num(b.size) + ' bytes.');
    replace('detail', el('div', null,
      dl,
      el('h3', null, 'Error message'), el('pre', { testid: 'detail-message' }, f.message || '(none)'),
      el('h3', null, 'Stack'), el('pre', { testid: 'detail-stack' }, f.stack || '(none)'),
      ...(d.validationIssues.length ? [el('h3', null, 'Validation issues'), el('ul', { testid: 'detail-validation-issues' }, ...d.validationIssues.map((line) => el('li', { className: 'mono wrap' }, line)))] : []),
      el('h3', null, 'Attempt history'),
      table([{ label: 'At' }, { label: 'Delayed retry', num: true }, { label: 'Immediate attempt', num: true }, { label: 'Error' }, { label: 'Message' }], history, 'No history recorded.'),
      el('h3', null, 'Body ', el('span', { className: 'muted small', testid: 'body-note' }, bodyNote)),
      el('pre', { testid: 'detail-body' }, bodyText),
      el('details', { testid: 'detail-headers' }, el('summary', null, 'Headers (' + headers.length + ')'),
        table([{ label: 'Name' }, { label: 'Value' }], headers, 'No headers.'))));
    $('detail-panel').scrollIntoView({ block: 'nearest' });
  }
  function closeEntry() { state.entry = null; $('detail-panel').hidden = true; }

  // ---- actions ----
  async function act(label, run) {
    if (state.busy) return;
    state.busy = true;
    try {
      status(label + '\\u2026');
      status(await run());
    } catch (e) {
      status(label + ' failed: ' + e.message, true);
    } finally {
      state.busy = false;
      await refreshGroups();
      if (state.selected) await loadMessages();
      void refreshStats();
    }
  }
  function retryOne(errorQueue, key) {
    return act('Retrying', async () => {
      const r = await api('api/retry', { errorQueue, key });
      if (state.entry && state.entry.key === key) closeEntry();
      return r.sentTo ? 'Sent back to ' + r.sentTo + '.' : 'It was no longer in the error queue.';
    });
  }
  function deleteOne(errorQueue, key) {
    if (!window.confirm('Delete this message for good?')) return;
    return act('Deleting', async () => {
      const r = await api('api/delete', { errorQueue, key });
      if (state.entry && state.entry.key === key) closeEntry();
      return r.deleted ? 'Deleted.' : 'It was no longer in the error queue.';
    });
  }
  function retryGroup(g) {
    if (!window.confirm('Send ' + g.count + ' messages back to the queues they failed on?')) return;
    return act('Retrying the group', async () => {
      const r = await api('api/retry', { errorQueue: g.errorQueue, group: g.signature.id });
      return 'Sent back ' + r.sent + ' messages' + (r.missing ? ' (' + r.missing + ' were already gone)' : '') + (r.failed ? '; ' + r.failed + ' failed: ' + r.error : '') + '.';
    });
  }

  $('refresh').addEventListener('click', () => { void refreshStats(); void refreshGroups().then(() => loadMessages()); });
  $('prev').addEventListener('click', () => { state.offset = Math.max(0, state.offset - state.limit); void loadMessages(); });
  $('next').addEventListener('click', () => { state.offset += state.limit; void loadMessages(); });
  $('detail-close').addEventListener('click', closeEntry);
  $('detail-retry').addEventListener('click', () => { if (state.entry) void retryOne(state.entry.errorQueue, state.entry.key); });
  $('detail-delete').addEventListener('click', () => { if (state.entry) void deleteOne(state.entry.errorQueue, state.entry.key); });

  let ticks = 0;
  void refreshStats();
  void refreshGroups();
  setInterval(() => {
    void refreshStats();
    if (++ticks % 3 === 0 && !state.busy) void refreshGroups();
  }, 2000);
})();
`;
}
