import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLoopbackHost } from './options.js';

/** The request header that carries the CSRF token on state-changing requests. */
export const CSRF_HEADER = 'x-redeliver-csrf';

/** Compares two secrets in time that does not depend on where they differ (or on their lengths). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a, 'utf8').digest();
  const hb = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** A fresh random value for a CSP nonce or a CSRF token. */
export function randomToken(bytes = 24): string {
  return randomBytes(bytes).toString('base64url');
}

/** Headers every response carries. */
export function setSecurityHeaders(res: ServerResponse): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  res.setHeader('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
}

/** The Content-Security-Policy of the page, allowing only its own inline script and style. */
export function pagePolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' 'nonce-${nonce}'`,
    `style-src 'self' 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The Host header values a request may carry. Checking Host stops DNS
 * rebinding: a hostile page whose name resolves to 127.0.0.1 sends its own
 * name as Host. On a non-loopback address the names the machine is reached
 * by are unknown, and the token guards instead.
 */
export function allowedHosts(boundHost: string, port: number, publicUrl: URL | undefined): Set<string> | undefined {
  if (!isLoopbackHost(boundHost)) return undefined;
  const names = new Set(['127.0.0.1', 'localhost', '[::1]', bracket(boundHost)]);
  const hosts = new Set([...names].map((n) => `${n.toLowerCase()}:${port}`));
  // A reverse proxy that keeps the Host header sends the public one.
  if (publicUrl) hosts.add(publicUrl.host.toLowerCase());
  return hosts;
}

/** IPv6 addresses in URLs and Host headers are bracketed. */
export function bracket(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth !== 'string') return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1];
}

/** The value of one cookie, or undefined. */
export function cookie(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * The Set-Cookie value of a session cookie: scoped to the public path and
 * `Secure` when the dashboard is served over https.
 */
export function sessionCookie(name: string, sessionId: string, publicUrl: URL | undefined): string {
  const secure = publicUrl?.protocol === 'https:' ? '; Secure' : '';
  return `${name}=${encodeURIComponent(sessionId)}; Path=${publicUrl?.pathname ?? '/'}; HttpOnly; SameSite=Strict${secure}`;
}

/**
 * Whether `origin` is the dashboard's own: the origin of its public URL, or
 * `http://` and the Host header of a request made straight to the
 * listening address (not through the public host).
 */
export function isOwnOrigin(origin: string, host: string, publicUrl: URL | undefined): boolean {
  const o = origin.toLowerCase();
  const h = host.toLowerCase();
  if (publicUrl && o === publicUrl.origin.toLowerCase()) return true;
  return h !== publicUrl?.host.toLowerCase() && o === `http://${h}`;
}

/**
 * Why a state-changing request is refused, or undefined when it may go on:
 * it must come from the dashboard's own page (its Origin is the dashboard's,
 * see {@link isOwnOrigin}, and it is same-origin by Fetch Metadata when the
 * browser sends it), carry the CSRF token, and be JSON.
 */
export function stateChangeRefusal(req: IncomingMessage, csrfToken: string, publicUrl: URL | undefined): { status: number; error: string } | undefined {
  const host = req.headers.host;
  const origin = req.headers.origin;
  if (typeof origin !== 'string' || typeof host !== 'string' || !isOwnOrigin(origin, host, publicUrl)) {
    return { status: 403, error: "the request does not come from this dashboard (Origin is neither the public URL's nor the Host's)" };
  }
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin') return { status: 403, error: 'cross-site request refused' };
  const presented = req.headers[CSRF_HEADER];
  if (typeof presented !== 'string' || !safeEqual(presented, csrfToken)) return { status: 403, error: 'missing or wrong CSRF token' };
  const type = req.headers['content-type'];
  if (typeof type !== 'string' || type.split(';')[0]!.trim().toLowerCase() !== 'application/json') {
    return { status: 415, error: 'the request body must be application/json' };
  }
  return undefined;
}

/**
 * Why a chart sent to `POST /api/charts` is refused, or undefined when it
 * may go on. The chart feed is for command line tools on this machine, not
 * browsers: a request a browser made (it carries `Origin`, or Fetch
 * Metadata other than `Sec-Fetch-Site: none`) is refused whatever it
 * carries, and only `Authorization: Bearer <chartToken>` admits it (the
 * dashboard token, its session cookie and the CSRF token do not).
 */
export function chartPostRefusal(req: IncomingMessage, chartToken: string): { status: number; error: string } | undefined {
  const site = req.headers['sec-fetch-site'];
  if (req.headers.origin !== undefined || (site !== undefined && site !== 'none')) {
    return { status: 403, error: 'charts are accepted from command line tools, not from web pages' };
  }
  const presented = bearerToken(req);
  if (presented === undefined || !safeEqual(presented, chartToken)) return { status: 403, error: 'a valid chart token is required: Authorization: Bearer <chartToken>' };
  const type = req.headers['content-type'];
  if (typeof type !== 'string' || type.split(';')[0]!.trim().toLowerCase() !== 'application/json') {
    return { status: 415, error: 'the request body must be application/json' };
  }
  return undefined;
}
