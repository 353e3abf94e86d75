/**
 * The browser-side helpers both dashboard pages start their script with:
 * building elements without markup (every value goes through text nodes),
 * tables, buttons, times and numbers, the status line, and `api`, which
 * sends state-changing calls with the CSRF token from the page's meta tag.
 */
export const PAGE_HELPERS = `
  const csrf = document.querySelector('meta[name="redeliver-csrf"]').getAttribute('content');
  const $ = (id) => document.getElementById(id);
  function el(tag, options, ...children) {
    const node = document.createElement(tag);
    const o = options || {};
    if (o.className) node.className = o.className;
    if (o.title) node.title = o.title;
    if (o.testid) node.dataset.testid = o.testid;
    if (o.data) for (const k of Object.keys(o.data)) node.dataset[k] = o.data[k];
    if (o.onclick) node.addEventListener('click', o.onclick);
    if (o.type) node.type = o.type;
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === 'object' ? child : String(child));
    }
    return node;
  }
  function table(columns, rows, emptyText) {
    if (rows.length === 0) return el('p', { className: 'empty' }, emptyText);
    const head = el('tr', null, ...columns.map((c) => el('th', { className: c.num ? 'num' : '' }, c.label)));
    return el('table', null, el('thead', null, head), el('tbody', null, ...rows));
  }
  function button(label, className, onclick, testid) {
    return el('button', { type: 'button', className, testid, onclick: (e) => { e.stopPropagation(); onclick(); } }, label);
  }
  function time(iso) { return iso ? String(iso).replace('T', ' ').replace(/\\.\\d+Z$/, 'Z') : '\\u2014'; }
  function num(n) { return typeof n === 'number' ? n.toLocaleString('en-US') : '\\u2014'; }
  function status(text, isError) { const s = $('status'); s.textContent = text || ''; s.className = isError ? 'error' : ''; }

  async function api(path, body) {
    const init = { credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.method = 'POST';
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Redeliver-CSRF'] = csrf;
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) throw new Error((data && data.error) || ('HTTP ' + res.status));
    return data;
  }
`;
