import { request as httpRequest } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { Transport } from '../../src/transport/types.js';
import { jsonCodec } from '../../src/codec.js';
import { tokenFilePath } from '../../src/dashboard/token-file.js';

/** A message body the test handler understands: `fail` names the error to throw while `poisoned` is on. */
export interface TestMessage {
  n: number;
  fail?: { name: string; message: string };
}

/** A switchable test handler: messages with `fail` throw while `poisoned` is true. */
export class Switch {
  poisoned = true;
}

/** Thrown by the test handler; its name comes from the message. */
class NamedError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

/** An endpoint with no retries: a failing message goes straight to the error queue. */
export function failingEndpoint(transport: Transport, poison: Switch, name = 'orders'): Endpoint<TestMessage> {
  return new Endpoint<TestMessage>({
    name,
    transport,
    concurrency: 8,
    recoverability: { immediateRetries: 1, delayedRetries: 0 },
    handler: (message) => {
      if (message.fail && poison.poisoned) throw new NamedError(message.fail.name, message.fail.message);
    },
  });
}

/** Sends JSON messages to `queue`. */
export async function sendAll(transport: Transport, queue: string, messages: readonly TestMessage[], prefix = 'msg'): Promise<void> {
  for (const m of messages) await transport.send(queue, { id: `${prefix}-${m.n}`, body: jsonCodec.encode(m), headers: { 'x-tenant': 'acme' } });
}

/** Resolves once `predicate` holds, polling every 10 ms, or rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Dead-letters `messages` through an endpoint with a failing handler; resolves once all settled. */
export async function deadLetterAll(transport: Transport, messages: readonly TestMessage[], queue = 'orders'): Promise<void> {
  const poison = new Switch();
  const endpoint = failingEndpoint(transport, poison, queue);
  await endpoint.start();
  await sendAll(transport, queue, messages);
  await waitFor(() => endpoint.stats.deadLettered + endpoint.stats.handled >= messages.length, 20_000, 'messages to settle');
  await endpoint.stop();
}

/** A raw HTTP request with full control over Host, Origin and Cookie headers. */
export function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: import('node:http').IncomingHttpHeaders; text: string; json: () => any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The header that carries a dashboard token as a bearer. */
export function bearer(token: string): Record<string, string> {
  return { Authorization: `Bearer ${token}` };
}

/**
 * {@link request} as the dashboard's operator makes it: with the token (read
 * when the request is made) as a bearer, unless the request carries its own
 * Authorization or Cookie header.
 */
export function operatorRequest(token: () => string): typeof request {
  return (url, options = {}) => {
    const own = Object.keys(options.headers ?? {}).some((name) => /^(authorization|cookie)$/i.test(name));
    return request(url, own ? options : { ...options, headers: { ...bearer(token()), ...options.headers } });
  };
}

/** Opens `baseUrl?token=` as a browser would, and resolves the session cookie it sets, as a Cookie header value. */
export async function signIn(baseUrl: string, token: string, headers: Record<string, string> = {}): Promise<string> {
  const login = await request(`${baseUrl}?token=${encodeURIComponent(token)}`, { headers });
  const cookie = String(login.headers['set-cookie'] ?? '').split(';')[0];
  if (login.status !== 303 || !cookie) throw new Error(`signing in failed (status ${login.status})`);
  return cookie;
}

/** The token `redeliver dashboard` made up for the dashboard at `url`, read from its token file as its operator does. */
export function tokenFromFile(env: Readonly<Record<string, string | undefined>>, url: string): string {
  return readFileSync(tokenFilePath(env, Number(new URL(url).port)), 'utf8').trim();
}

/** The CSRF token the page carries. */
export async function csrfOf(baseUrl: string, headers: Record<string, string> = {}): Promise<string> {
  const page = await request(baseUrl, { headers });
  const match = /<meta name="redeliver-csrf" content="([^"]+)">/.exec(page.text);
  if (!match) throw new Error(`no CSRF token in the page (status ${page.status})`);
  return match[1]!;
}

/** A token of the same length as `token` that differs from it in its last character, whatever that character is. */
export function wrongToken(token: string): string {
  return `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
}

/** Headers of a well-formed state-changing request from the dashboard's own page. */
export function postHeaders(baseUrl: string, csrf: string): Record<string, string> {
  const origin = new URL(baseUrl).origin;
  return { 'Content-Type': 'application/json', Origin: origin, 'X-Redeliver-CSRF': csrf };
}

/**
 * A SQLite transport factory when SqliteTransport offers error-queue
 * operations, otherwise undefined. Files go in a temporary folder that
 * `cleanup` removes.
 */
export async function sqliteWithErrorQueue(): Promise<{ create: (name: string) => Promise<Transport>; path: (name: string) => string; cleanup: () => void } | undefined> {
  const { SqliteTransport } = await import('../../src/transports/sqlite/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-dashboard-'));
  const probe: Transport = new SqliteTransport({ path: join(dir, 'probe.db') });
  const supported = probe.errorQueue !== undefined;
  await probe.close();
  if (!supported) {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  return {
    create: async (name) => new SqliteTransport({ path: join(dir, `${name}.db`), pollIntervalMs: 50 }),
    path: (name) => join(dir, `${name}.db`),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
