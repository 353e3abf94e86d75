/**
 * Signed-in browsers of one dashboard. Opening the page with `?token=`
 * starts a session: a random id kept in a cookie named for the dashboard's
 * port, so a dashboard on another port of the same host (cookies do not
 * keep ports apart) neither overwrites it nor accepts it; and the cookie
 * holds the session id, never the token, which another dashboard would
 * not know anyway. Sessions last until the dashboard stops.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { bearerToken, cookie, randomToken, safeEqual } from './security.js';

/** A signed-in browser. */
export interface Session {
  /** The secret the cookie carries. */
  readonly id: string;
  /** A name for the session that gives nothing away, recorded as who made a change: `session-<8 hex digits>`. */
  readonly label: string;
}

/** The most sessions kept; signing in beyond it ends the oldest. */
export const MAX_SESSIONS = 1_000;

/** The name of the session cookie of the dashboard listening on `port`. */
export function sessionCookieName(port: number): string {
  return `redeliver_dashboard_${port}`;
}

/** The sessions of one dashboard, in memory. */
export class Sessions {
  readonly #byId = new Map<string, Session>();

  /** Starts a session. */
  open(): Session {
    const id = randomToken();
    const session = { id, label: `session-${createHash('sha256').update(id).digest('hex').slice(0, 8)}` };
    this.#byId.set(id, session);
    if (this.#byId.size > MAX_SESSIONS) this.#byId.delete(this.#byId.keys().next().value!);
    return session;
  }

  /** The session with this id, or undefined. */
  find(id: string): Session | undefined {
    return this.#byId.get(id);
  }
}

/** Who made a request: `token` for `Authorization: Bearer <token>`, else the label of its session. */
export type Actor = 'token' | Session['label'];

/**
 * Who made `req`, or undefined when it carries neither the dashboard token
 * as `Authorization: Bearer <token>` nor the cookie `cookieName` of one of
 * `sessions`.
 */
export function authenticate(req: IncomingMessage, token: string, sessions: Sessions, cookieName: string): Actor | undefined {
  const bearer = bearerToken(req);
  if (bearer !== undefined) return safeEqual(bearer, token) ? 'token' : undefined;
  const id = cookie(req, cookieName);
  return id === undefined ? undefined : sessions.find(id)?.label;
}
