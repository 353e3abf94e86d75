import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createDashboard, type Dashboard } from '../../src/dashboard/index.js';
import { DashboardOptionError } from '../../src/dashboard/options.js';
import { HEADER } from '../../src/headers/names.js';
import { validationIssuesHeader } from '../../src/headers/validation-issues.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { bearer, csrfOf, deadLetterAll, operatorRequest, postHeaders, request as rawRequest, signIn, waitFor, wrongToken, type TestMessage } from './support.js';

const TOKEN = 'a-test-token-0123456789abcdef';

const notFound = (n: number): TestMessage => ({ n, fail: { name: 'OrderNotFound', message: `order ${1000 + n} not found in 'warehouse-${n}'` } });
const tooLarge = (n: number): TestMessage => ({ n, fail: { name: 'RangeError', message: `amount ${n * 7} is over the limit` } });

describe('dashboard JSON API', () => {
  let transport: MemoryTransport;
  let dashboard: Dashboard | undefined;
  /** Requests of the dashboard's operator, who has its token. */
  const request = operatorRequest(() => dashboard!.token);
  const auth = () => bearer(dashboard!.token);

  afterEach(async () => {
    await dashboard?.close();
    dashboard = undefined;
    await transport?.close();
  });

  async function start(messages: TestMessage[], options: Partial<Parameters<typeof createDashboard>[0]> = {}) {
    transport = new MemoryTransport();
    await deadLetterAll(transport, messages);
    dashboard = await createDashboard({ transport, ...options });
    return dashboard.url;
  }

  it('groups the error queue by failure signature, largest group first', async () => {
    const url = await start([notFound(1), tooLarge(2), notFound(3), notFound(4), tooLarge(5), { n: 6 }]);
    const res = await request(`${url}api/groups`);
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.total).toBe(2);
    expect(body.queues).toEqual([expect.objectContaining({ errorQueue: 'error', scanned: 5, truncated: false })]);
    const [first, second] = body.groups;
    expect(first).toMatchObject({ errorQueue: 'error', count: 3, signature: { errorName: 'OrderNotFound', message: 'order <n> not found in <value>', reason: 'retries-exhausted' } });
    expect(first.signature.topFrame).toMatch(/^at /);
    expect(first.firstSeen <= first.lastSeen).toBe(true);
    expect(second).toMatchObject({ count: 2, signature: { errorName: 'RangeError', message: 'amount <n> is over the limit' } });
  });

  it('caps open connections: one beyond maxConnections is closed at once', async () => {
    const url = new URL(await start([], { maxConnections: 2 }));
    const open = (): Promise<Socket> =>
      new Promise((resolve, reject) => {
        const socket = connect(Number(url.port), url.hostname, () => resolve(socket));
        socket.on('error', reject);
      });
    const held = [await open(), await open()];
    await new Promise((r) => setTimeout(r, 50)); // the server has counted both
    const extra = await open();
    const closed = await new Promise<boolean>((resolve) => {
      extra.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 2_000);
    });
    expect(closed).toBe(true);
    for (const socket of held) socket.destroy();
    await waitFor(async () => (await request(`${url.href}api/stats`).then((r) => r.status, () => 0)) === 200, 5_000, 'a free slot');
  });

  it('says when the error queue holds more than it reads', async () => {
    const url = await start([notFound(1), notFound(2), notFound(3), tooLarge(4)], { maxScan: 3 });
    const body = (await request(`${url}api/groups`)).json();
    expect(body.queues[0]).toMatchObject({ scanned: 3, truncated: true });
    expect(body.groups.reduce((n: number, g: { count: number }) => n + g.count, 0)).toBe(3);
  });

  it("pages through a group's messages and shows one in full", async () => {
    const url = await start([notFound(1), notFound(2), notFound(3), tooLarge(4)]);
    const group = (await request(`${url}api/groups`)).json().groups[0].signature.id;
    const page1 = (await request(`${url}api/entries?errorQueue=error&group=${group}&offset=0&limit=2`)).json();
    expect(page1).toMatchObject({ total: 3, offset: 0, limit: 2 });
    expect(page1.entries.map((e: { messageId: string }) => e.messageId)).toEqual(['msg-1', 'msg-2']);
    expect(page1.entries[0].message).toBe("order 1001 not found in 'warehouse-1'");
    const page2 = (await request(`${url}api/entries?errorQueue=error&group=${group}&offset=2&limit=2`)).json();
    expect(page2.entries.map((e: { messageId: string }) => e.messageId)).toEqual(['msg-3']);

    const all = (await request(`${url}api/entries?errorQueue=error&limit=10`)).json();
    expect(all.total).toBe(4);

    const key = page1.entries[0].key;
    const detail = (await request(`${url}api/entries/error/${encodeURIComponent(key)}`)).json();
    expect(detail).toMatchObject({ messageId: 'msg-1', errorQueue: 'error', failure: { reason: 'retries-exhausted', errorName: 'OrderNotFound', queue: 'orders', endpoint: 'orders', attempts: '2' } });
    expect(detail.failure.stack).toContain('OrderNotFound');
    expect(detail.history).toHaveLength(2);
    expect(detail.history[0]).toMatchObject({ errorName: 'OrderNotFound', immediateAttempt: 1, delayedAttempt: 0 });
    expect(detail.body).toMatchObject({ encoding: 'utf8', truncated: false });
    expect(JSON.parse(detail.body.text)).toMatchObject({ n: 1 });
    expect(detail.headers).toContainEqual(['x-tenant', 'acme']);
    expect(detail.headers).toContainEqual([HEADER.failureReason, 'retries-exhausted']);

    expect((await request(`${url}api/entries/error/no-such-key`)).status).toBe(404);
    expect((await request(`${url}api/entries/orders/${key}`)).status).toBe(400);
    expect((await request(`${url}api/entries?errorQueue=error&limit=x`)).status).toBe(400);
  });

  it("shows an entry's validation issues, one path: message line each, as text", async () => {
    const url = await start([]);
    const hostile = '<img src=x onerror=window.__xss=1>';
    const issues = [
      { path: ['items', 0, 'sku'], message: 'Expected string, received number' },
      { path: [], message: hostile },
      ...Array.from({ length: 21 }, (_, i) => ({ path: [`f${i}`], message: 'required' })),
    ];
    await transport.send('error', {
      id: 'invalid-1',
      body: new TextEncoder().encode('{"items":[{"sku":1}]}'),
      headers: { [HEADER.failureReason]: 'validation', [HEADER.failureErrorName]: 'ValidationError', [HEADER.validationIssues]: validationIssuesHeader(issues) },
    });
    await transport.send('error', { id: 'valid-1', body: new TextEncoder().encode('{}'), headers: { [HEADER.failureReason]: 'retries-exhausted' } });
    const entries = (await request(`${url}api/entries?errorQueue=error&limit=10`)).json().entries as { key: string; messageId: string }[];
    const detailOf = async (id: string) => (await request(`${url}api/entries/error/${encodeURIComponent(entries.find((e) => e.messageId === id)!.key)}`)).json();
    const lines = (await detailOf('invalid-1')).validationIssues as string[];
    expect(lines.slice(0, 3)).toEqual(['items[0].sku: Expected string, received number', `(body): ${hostile}`, 'f0: required']);
    // 20 issues are kept in the header; the other 3 are counted.
    expect(lines).toHaveLength(21);
    expect(lines.at(-1)).toBe('and 3 more issues not recorded');
    expect((await detailOf('valid-1')).validationIssues).toEqual([]);
    // The page renders each line as a text node: no markup is ever assigned.
    const html = (await request(url)).text;
    expect(html).toContain("el('ul', { testid: 'detail-validation-issues' }");
    expect(html).not.toMatch(/innerHTML|insertAdjacentHTML|outerHTML/);
  });

  it('shows a binary body as hex and cuts a long body, saying so', async () => {
    transport = new MemoryTransport();
    const failure = { [HEADER.failureQueue]: 'orders', [HEADER.failureReason]: 'deserialization', [HEADER.failureMessage]: 'bad' };
    await transport.send('error', { id: 'bin', body: new Uint8Array([0xff, 0xfe, 0x00, 0x41]), headers: failure });
    await transport.send('error', { id: 'long', body: new TextEncoder().encode('é'.repeat(40_000)), headers: failure });
    dashboard = await createDashboard({ transport });
    const entries = (await request(`${dashboard.url}api/entries?errorQueue=error`)).json().entries;
    const bin = (await request(`${dashboard.url}api/entries/error/${entries[0].key}`)).json();
    expect(bin.body).toEqual({ encoding: 'hex', text: `00000000  ${'ff fe 00 41'.padEnd(47)}  ...A`, size: 4, truncated: false, shownBytes: 4 });
    const long = (await request(`${dashboard.url}api/entries/error/${entries[1].key}`)).json();
    expect(long.body).toMatchObject({ encoding: 'utf8', size: 80_000, truncated: true, shownBytes: 65_536 });
    expect(long.body.text).toBe('é'.repeat(32_768));
  });

  it('retries one message, retries a group, and deletes one', async () => {
    const url = await start([notFound(1), notFound(2), notFound(3), tooLarge(4), tooLarge(5)]);
    const csrf = await csrfOf(url, auth());
    const groups = (await request(`${url}api/groups`)).json().groups;
    const notFoundGroup = groups[0].signature.id;
    const rangeGroup = groups[1].signature.id;
    const entries = (await request(`${url}api/entries?errorQueue=error&group=${notFoundGroup}`)).json().entries;

    const one = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key: entries[0].key }) });
    expect(one.status).toBe(200);
    expect(one.json()).toEqual({ sentTo: 'orders' });
    expect(transport.depth('orders')).toBe(1);
    const again = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key: entries[0].key }) });
    expect(again.json()).toEqual({ sentTo: null });

    const del = await request(`${url}api/delete`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key: entries[1].key }) });
    expect(del.json()).toEqual({ deleted: true });

    const group = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', group: rangeGroup }) });
    expect(group.json()).toEqual({ sent: 2, missing: 0, failed: 0 });
    expect(transport.depth('orders')).toBe(3);

    const after = (await request(`${url}api/groups`)).json();
    expect(after.groups).toHaveLength(1);
    expect(after.groups[0]).toMatchObject({ count: 1, signature: { id: notFoundGroup } });
    const gone = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', group: rangeGroup }) });
    expect(gone.status).toBe(404);
    const bad = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'orders', key: '1' }) });
    expect(bad.status).toBe(400);
    const both = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key: '1', group: 'x' }) });
    expect(both.status).toBe(400);
  });

  it('sends back only to the allowed queues, and never to a queue that does not exist', async () => {
    const url = await start([notFound(1), notFound(2), tooLarge(3)], { allowedQueues: ['orders.replay'] });
    const csrf = await csrfOf(url, auth());
    const [group] = (await request(`${url}api/groups`)).json().groups;
    const entries = (await request(`${url}api/entries?errorQueue=error`)).json().entries;
    const one = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key: entries[0].key }) });
    expect(one.status).toBe(409);
    expect(one.json().error).toContain("'orders' is not one of the queues allowed as a destination");
    const many = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', group: group.signature.id }) });
    expect(many.json()).toMatchObject({ sent: 0, missing: 0, failed: 2 });
    expect(transport.depth('error')).toBe(3);
    expect(transport.depth('orders')).toBe(0);
    await expect(createDashboard({ transport, allowedQueues: [''] })).rejects.toThrow(/allowedQueues/);
  });

  it('refuses to send back to a queue named only by a forged entry', async () => {
    transport = new MemoryTransport();
    const forged = { [HEADER.failureQueue]: 'billing.internal', [HEADER.failureReason]: 'unrecoverable', [HEADER.failureMessage]: 'x' };
    await transport.send('error', { id: 'forged', body: new TextEncoder().encode('{}'), headers: forged });
    dashboard = await createDashboard({ transport });
    const csrf = await csrfOf(dashboard.url, auth());
    const [entry] = (await request(`${dashboard.url}api/entries?errorQueue=error`)).json().entries;
    const res = await request(`${dashboard.url}api/retry`, { method: 'POST', headers: postHeaders(dashboard.url, csrf), body: JSON.stringify({ errorQueue: 'error', key: entry.key }) });
    expect(res.status).toBe(409);
    expect(res.json().error).toContain("no queue 'billing.internal' exists");
    expect(transport.depth('error')).toBe(1);
    expect((await transport.inspection.queueDepths()).map((d) => d.queue)).not.toContain('billing.internal');
  });

  it('lists an entry with no error name (redeliver did not write it) with none, not an invented Error', async () => {
    transport = new MemoryTransport();
    await transport.send('error', { id: 'foreign', body: new TextEncoder().encode('{}'), headers: { [HEADER.failureMessage]: 'dropped by hand' } });
    dashboard = await createDashboard({ transport });
    const group = (await request(`${dashboard.url}api/groups`)).json().groups[0];
    expect(group.signature.errorName).toBe('');
    const [entry] = (await request(`${dashboard.url}api/entries?errorQueue=error&group=${group.signature.id}`)).json().entries;
    expect(entry).toMatchObject({ messageId: 'foreign', errorName: '', message: 'dropped by hand' });
  });

  it('behind an https reverse proxy: accepts its Origin and Host, sets a Secure cookie on its path', async () => {
    const url = await start([notFound(1)], { token: TOKEN, publicUrl: 'https://ops.example.com/redeliver' });
    const proxied = { Host: 'ops.example.com', 'X-Forwarded-Proto': 'https' };
    const login = await request(`${url}?token=${TOKEN}`, { headers: proxied });
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/redeliver/');
    const setCookie = String(login.headers['set-cookie']);
    expect(setCookie).toMatch(/; Secure/);
    expect(setCookie).toMatch(/; Path=\/redeliver\//);
    const cookie = setCookie.split(';')[0]!;
    const csrf = await csrfOf(url, { ...proxied, Cookie: cookie });
    const key = (await request(`${url}api/entries?errorQueue=error`, { headers: { ...proxied, Cookie: cookie } })).json().entries[0].key;
    const body = JSON.stringify({ errorQueue: 'error', key });
    const post = (origin: string) =>
      request(`${url}api/retry`, { method: 'POST', headers: { ...proxied, Cookie: cookie, 'Content-Type': 'application/json', 'X-Redeliver-CSRF': csrf, Origin: origin }, body });
    expect((await post('http://ops.example.com')).status).toBe(403);
    expect((await post('https://evil.example')).status).toBe(403);
    expect(transport.depth('error')).toBe(1);
    const ok = await post('https://ops.example.com');
    expect(ok.status).toBe(200);
    expect(ok.json()).toEqual({ sentTo: 'orders' });
  });

  it('rejects a public URL that is not http(s), or carries credentials, a query or a fragment', async () => {
    transport = new MemoryTransport();
    for (const publicUrl of ['ftp://ops.example.com/', 'https://user:pw@ops.example.com/', 'https://ops.example.com/?a=1', 'https://ops.example.com/#x', 'not a url']) {
      await expect(createDashboard({ transport, publicUrl }), publicUrl).rejects.toThrow(DashboardOptionError);
    }
  });

  it('reports queue depths and dead-letters per minute', async () => {
    const url = await start([notFound(1), notFound(2)]);
    const stats = (await request(`${url}api/stats`)).json();
    expect(stats.transport).toBe('memory');
    expect(stats.errorQueues).toEqual([{ name: 'error', count: 2, deadLettersPerMinute: 0 }]);
    expect(stats.queues).toContainEqual({ queue: 'error', kind: 'error', ready: 2, delayed: 0, inFlight: 0 });
    expect(stats.endpoints).toEqual([]);
  });

  it('still reports error-queue counts when the transport fails to read queue depths', async () => {
    transport = new MemoryTransport();
    await deadLetterAll(transport, [notFound(1)]);
    const failing = Object.create(transport, {
      inspection: { value: { queueDepths: () => Promise.reject(new Error('no such table')) } },
    }) as MemoryTransport;
    dashboard = await createDashboard({ transport: failing });
    const stats = (await request(`${dashboard.url}api/stats`)).json();
    expect(stats).toMatchObject({ queues: null, queuesError: 'no such table', errorQueues: [{ name: 'error', count: 1 }] });
  });
});

describe('dashboard security', () => {
  let transport: MemoryTransport;
  let dashboard: Dashboard | undefined;
  /** Requests of the dashboard's operator, who has its token. */
  const request = operatorRequest(() => dashboard!.token);
  const auth = () => bearer(dashboard!.token);

  afterEach(async () => {
    await dashboard?.close();
    dashboard = undefined;
    await transport?.close();
  });

  async function start(options: Partial<Parameters<typeof createDashboard>[0]> = {}) {
    transport = new MemoryTransport();
    await deadLetterAll(transport, [notFound(1)]);
    dashboard = await createDashboard({ transport, ...options });
    return dashboard.url;
  }

  it('serves the page with a nonce CSP, nosniff and no framing, and never assigns markup', async () => {
    const url = await start();
    const res = await request(url);
    expect(res.status).toBe(200);
    const csp = String(res.headers['content-security-policy']);
    const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeTruthy();
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.text).toContain(`<script nonce="${nonce}">`);
    expect(res.text).toContain(`<style nonce="${nonce}">`);
    expect(res.text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    expect(res.text).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!dashboard)/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('DENY');
    const second = await request(url);
    expect(/'nonce-([^']+)'/.exec(String(second.headers['content-security-policy']))?.[1]).not.toBe(nonce);
    const api = await request(`${url}api/groups`);
    expect(api.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(api.headers['x-content-type-options']).toBe('nosniff');
  });

  it('refuses state changes without the CSRF token, from another origin, or not as JSON (403 / 415)', async () => {
    const url = await start();
    const csrf = await csrfOf(url, auth());
    const key = (await request(`${url}api/entries?errorQueue=error`)).json().entries[0].key;
    const body = JSON.stringify({ errorQueue: 'error', key });
    const good = postHeaders(url, csrf);
    const cases: [string, Record<string, string>, number][] = [
      ['no CSRF token', { ...good, 'X-Redeliver-CSRF': '' }, 403],
      ['a wrong CSRF token', { ...good, 'X-Redeliver-CSRF': wrongToken(csrf) }, 403],
      ['no Origin', Object.fromEntries(Object.entries(good).filter(([k]) => k !== 'Origin')), 403],
      ['a foreign Origin', { ...good, Origin: 'http://evil.example' }, 403],
      ['an Origin on another port', { ...good, Origin: 'http://127.0.0.1:1' }, 403],
      ['a cross-site fetch', { ...good, 'Sec-Fetch-Site': 'cross-site' }, 403],
      ['a form content type', { ...good, 'Content-Type': 'application/x-www-form-urlencoded' }, 415],
      ['a text content type', { ...good, 'Content-Type': 'text/plain' }, 415],
    ];
    for (const [label, headers, status] of cases) {
      for (const path of ['api/retry', 'api/delete']) {
        const res = await request(`${url}${path}`, { method: 'POST', headers, body });
        expect(res.status, `${label} on ${path}`).toBe(status);
      }
    }
    expect((await request(`${url}api/retry`, { method: 'GET' })).status).toBe(405);
    expect((await request(`${url}api/groups`, { method: 'POST', headers: good, body: '{}' })).status).toBe(405);
    expect((await request(`${url}api/retry`, { method: 'POST', headers: good, body: 'not json' })).status).toBe(400);
    expect((await request(`${url}api/retry`, { method: 'POST', headers: good, body: 'x'.repeat(20_000) })).status).toBe(413);
    // Nothing above touched the entry.
    expect(transport.depth('error')).toBe(1);
    expect((await request(`${url}api/delete`, { method: 'POST', headers: good, body })).json()).toEqual({ deleted: true });
  });

  it('refuses a foreign Host header (DNS rebinding) on a loopback address', async () => {
    const url = await start();
    const port = new URL(url).port;
    expect((await request(`${url}api/groups`, { headers: { Host: `evil.example:${port}` } })).status).toBe(403);
    expect((await request(url, { headers: { Host: `evil.example:${port}` } })).status).toBe(403);
    expect((await request(`${url}api/groups`, { headers: { Host: `localhost:${port}` } })).status).toBe(200);
  });

  it('makes up a random token when none is given, and refuses every request without it: another user of the machine gets nothing', async () => {
    const url = await start();
    expect(dashboard!.token).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    const other = await createDashboard({ transport });
    try {
      expect(other.token).not.toBe(dashboard!.token);
    } finally {
      await other.close();
    }
    const page = await rawRequest(url);
    expect(page.status).toBe(403);
    expect(page.text).not.toContain('redeliver-csrf');
    for (const path of ['api/groups', 'api/stats', 'api/entries?errorQueue=error']) expect((await rawRequest(`${url}${path}`)).status, path).toBe(403);
    const key = (await request(`${url}api/entries?errorQueue=error`)).json().entries[0].key;
    expect((await rawRequest(`${url}api/entries/error/${encodeURIComponent(key)}`)).status).toBe(403);
    // A write carrying everything but the token (the CSRF token as the page serves it to the operator) is refused too.
    const csrf = await csrfOf(url, auth());
    const body = JSON.stringify({ errorQueue: 'error', key });
    for (const path of ['api/retry', 'api/delete']) expect((await rawRequest(`${url}${path}`, { method: 'POST', headers: postHeaders(url, csrf), body })).status, path).toBe(403);
    expect(transport.depth('error')).toBe(1);
    expect((await rawRequest(`${url}api/groups`, { headers: { Authorization: `Bearer ${wrongToken(dashboard!.token)}` } })).status).toBe(403);
    expect((await rawRequest(`${url}?token=${wrongToken(dashboard!.token)}`)).status).toBe(403);
  });

  it('requires the token on every request when one is set, by bearer or by the session cookie it is traded for', async () => {
    const url = await start({ token: TOKEN });
    expect(dashboard!.token).toBe(TOKEN);
    expect((await rawRequest(url)).status).toBe(403);
    expect((await rawRequest(`${url}api/groups`)).status).toBe(403);
    expect((await rawRequest(`${url}api/groups`, { headers: { Authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(403);
    expect((await rawRequest(`${url}api/groups`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await rawRequest(`${url}?token=wrong`)).status).toBe(403);

    const login = await rawRequest(`${url}?token=${TOKEN}`);
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/');
    const setCookie = String(login.headers['set-cookie']);
    expect(setCookie).toMatch(new RegExp(`^redeliver_dashboard_${new URL(url).port}=`));
    expect(setCookie).not.toContain(TOKEN); // the cookie holds a session, not the token
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\/;/);
    expect(setCookie).not.toMatch(/Secure/); // plain http without a public https URL
    const cookie = setCookie.split(';')[0]!;
    expect((await rawRequest(`${url}api/groups`, { headers: { Cookie: cookie } })).status).toBe(200);
    expect((await rawRequest(`${url}api/groups`, { headers: { Cookie: `${cookie.split('=')[0]}=${TOKEN}` } })).status).toBe(403);

    // With the token but without CSRF, state changes are still refused.
    const key = (await rawRequest(`${url}api/entries?errorQueue=error`, { headers: { Cookie: cookie } })).json().entries[0].key;
    const body = JSON.stringify({ errorQueue: 'error', key });
    const noCsrf = await rawRequest(`${url}api/retry`, { method: 'POST', headers: { Cookie: cookie, 'Content-Type': 'application/json', Origin: new URL(url).origin }, body });
    expect(noCsrf.status).toBe(403);
    const csrf = await csrfOf(url, { Cookie: cookie });
    const noToken = await rawRequest(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body });
    expect(noToken.status).toBe(403);
    const ok = await rawRequest(`${url}api/retry`, { method: 'POST', headers: { ...postHeaders(url, csrf), Cookie: cookie }, body });
    expect(ok.status).toBe(200);
  });

  it("refuses the session cookie of a dashboard on another port of the same host, even one with the same token", async () => {
    const url = await start({ token: TOKEN });
    const other = await createDashboard({ transport, token: TOKEN });
    try {
      const otherCookie = await signIn(other.url, TOKEN);
      expect(otherCookie.split('=')[0]).toBe(`redeliver_dashboard_${new URL(other.url).port}`);
      expect((await rawRequest(`${other.url}api/groups`, { headers: { Cookie: otherCookie } })).status).toBe(200);
      expect((await rawRequest(`${url}api/groups`, { headers: { Cookie: otherCookie } })).status).toBe(403);
      expect((await rawRequest(url, { headers: { Cookie: otherCookie } })).status).toBe(403);
      // Under this dashboard's cookie name, the other's session is still unknown here.
      const renamed = `redeliver_dashboard_${new URL(url).port}=${otherCookie.split('=')[1]}`;
      expect((await rawRequest(`${url}api/groups`, { headers: { Cookie: renamed } })).status).toBe(403);
    } finally {
      await other.close();
    }
  });

  it('refuses a short token', async () => {
    transport = new MemoryTransport();
    await expect(createDashboard({ transport, host: '0.0.0.0', token: 'short' })).rejects.toThrow(/at least 16/);
    await expect(createDashboard({ transport, token: 'short' })).rejects.toThrow(DashboardOptionError);
    await expect(createDashboard({ transport, errorQueues: [] })).rejects.toThrow(DashboardOptionError);
    await expect(createDashboard({ transport: { ...transport, errorQueue: undefined, name: 'bare' } as never })).rejects.toThrow(/cannot browse error queues/);
  });

  it('starts on all interfaces with a random token when none is given, and then every request needs it', async () => {
    transport = new MemoryTransport();
    dashboard = await createDashboard({ transport, host: '0.0.0.0' });
    const port = new URL(dashboard.url).port;
    const local = `http://127.0.0.1:${port}/`;
    expect((await rawRequest(`${local}api/groups`)).status).toBe(403);
    expect((await rawRequest(`${local}api/groups`, { headers: auth() })).status).toBe(200);
    await waitFor(async () => (await rawRequest(`${local}api/stats`, { headers: auth() })).status === 200);
  });
});
