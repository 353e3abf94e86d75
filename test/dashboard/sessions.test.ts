/** The dashboard's sessions: random ids, labels that give nothing away, and a bound on how many are kept. */
import { describe, expect, it } from 'vitest';
import { MAX_SESSIONS, sessionCookieName, Sessions } from '../../src/dashboard/sessions.js';

describe('dashboard sessions', () => {
  it('names the cookie for the port', () => {
    expect(sessionCookieName(8080)).toBe('redeliver_dashboard_8080');
    expect(sessionCookieName(8081)).not.toBe(sessionCookieName(8080));
  });

  it('opens sessions with distinct random ids, and labels that are not part of the id', () => {
    const sessions = new Sessions();
    const a = sessions.open();
    const b = sessions.open();
    expect(a.id).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(a.id).not.toBe(b.id);
    expect(a.label).toMatch(/^session-[0-9a-f]{8}$/);
    expect(a.label).not.toBe(b.label);
    expect(sessions.find(a.id)).toBe(a);
    expect(sessions.find('no-such-session')).toBeUndefined();
  });

  it(`keeps the newest ${MAX_SESSIONS}: signing in beyond it ends the oldest`, () => {
    const sessions = new Sessions();
    const first = sessions.open();
    const second = sessions.open();
    for (let i = 2; i < MAX_SESSIONS; i++) sessions.open();
    expect(sessions.find(first.id)).toBe(first);
    sessions.open();
    expect(sessions.find(first.id)).toBeUndefined();
    expect(sessions.find(second.id)).toBe(second);
  });
});
