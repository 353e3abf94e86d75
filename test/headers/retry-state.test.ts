import { describe, expect, it } from 'vitest';
import { HEADER, LIMITS } from '../../src/headers/names.js';
import { decodeHeaders } from '../../src/transports/rabbitmq/wire-headers.js';
import { appendFailure, readRetryState, userHeaders, withRetryState } from '../../src/headers/retry-state.js';
import { summarizeError } from '../../src/headers/failure.js';

describe('retry headers', () => {
  it('round-trip the retry state and keep user headers', () => {
    const history = appendFailure([], { at: '2026-01-01T00:00:00.000Z', errorName: 'Error', message: 'x', immediateAttempt: 1, delayedAttempt: 0 });
    const headers = withRetryState({ 'x-user': 'u' }, { attempts: 6, delayedAttempts: 1, lastDelayMs: 10_000, delayedElapsedMs: 10_000, history });
    expect(headers['x-user']).toBe('u');
    expect(readRetryState(headers)).toEqual({ attempts: 6, delayedAttempts: 1, lastDelayMs: 10_000, delayedElapsedMs: 10_000, history });
  });

  it('read malformed and hostile values as defaults', () => {
    const hostile = JSON.parse('{"__proto__": {"polluted": "yes"}, "constructor": "x"}') as Record<string, string>;
    Object.assign(hostile, {
      [HEADER.attempts]: '-3',
      [HEADER.delayedAttempts]: '1e9',
      [HEADER.lastDelay]: 'NaN',
      [HEADER.history]: '{"not":"an array"}',
    });
    const state = readRetryState(hostile);
    expect(state).toEqual({ attempts: 0, delayedAttempts: 0, lastDelayMs: 0, delayedElapsedMs: 0, history: [] });
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    const kept = userHeaders(hostile);
    expect(Object.keys(kept)).not.toContain('constructor');
    expect(Object.getPrototypeOf(kept)).toBe(Object.prototype);
  });

  it('drop history entries of the wrong shape and bound the rest', () => {
    const raw = JSON.stringify([1, null, 'x', { errorName: 5, message: 'm'.repeat(10_000), immediateAttempt: -1 }]);
    const { history } = readRetryState({ [HEADER.history]: raw });
    expect(history).toHaveLength(1);
    expect(history[0]!.errorName).toBe('Error');
    expect(history[0]!.message.length).toBeLessThanOrEqual(500);
    expect(history[0]!.immediateAttempt).toBe(0);
  });

  it('keep the history header within its byte bound, dropping the oldest entries, so no transport cuts it into broken JSON', () => {
    let history = appendFailure([], { at: '2026-01-01T00:00:00.000Z', errorName: 'Error', message: 'first', immediateAttempt: 1, delayedAttempt: 0 });
    for (let i = 2; i <= 10; i++) {
      history = appendFailure(history, { at: '2026-01-01T00:00:00.000Z', errorName: 'Error', message: `${i} ${'€'.repeat(600)}`, immediateAttempt: 1, delayedAttempt: i - 1 });
    }
    const headers = withRetryState({}, { attempts: 10, delayedAttempts: 9, lastDelayMs: 1, delayedElapsedMs: 9, history });
    expect(Buffer.byteLength(headers[HEADER.history]!)).toBeLessThanOrEqual(LIMITS.historyBytes);
    // What a RabbitMQ consumer reads back is still the most recent failures.
    const read = readRetryState(decodeHeaders(headers).headers).history;
    expect(read.length).toBeGreaterThan(1);
    expect(read.at(-1)!.message.startsWith('10 ')).toBe(true);
    expect(read.map((r) => r.delayedAttempt)).toEqual(history.slice(-read.length).map((r) => r.delayedAttempt));
  });

  it('write redeliver headers before the user headers', () => {
    const headers = withRetryState({ b: '1', a: '2' }, { attempts: 1, delayedAttempts: 0, lastDelayMs: undefined, delayedElapsedMs: 0, history: [] });
    expect(Object.keys(headers)).toEqual([HEADER.attempts, HEADER.delayedAttempts, 'b', 'a']);
  });

  it('summarise anything thrown, bounded', () => {
    expect(summarizeError('plain string')).toEqual({ name: 'NonError', message: 'plain string', stack: '' });
    expect(summarizeError(undefined).message).toBe('undefined');
    const huge = summarizeError(new Error('e'.repeat(100_000)));
    expect(huge.message.length).toBeLessThanOrEqual(4_096);
  });
});
