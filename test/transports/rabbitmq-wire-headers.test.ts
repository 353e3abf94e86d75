/**
 * Header budgets on the RabbitMQ wire (pure, no broker): redeliver's own
 * headers have a budget of their own, so user headers can never push out
 * the retry state, whatever order the table arrives in.
 */
import { describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { decodeHeaders, encodeHeaders, HEADER_LIMITS, headerEntryBytes } from '../../src/transports/rabbitmq/wire-headers.js';
import { userHeadersAtTheLimit } from '../support/large-headers.js';

const own = { [HEADER.attempts]: '3', [HEADER.delayedAttempts]: '1', [HEADER.history]: '[]' };

describe('header budgets', () => {
  it('keeps redeliver headers that follow user headers filling their budget, and drops the user headers past it', () => {
    const user = userHeadersAtTheLimit();
    const decoded = decodeHeaders({ ...user, extra: 'x'.repeat(100), ...own });
    expect(decoded.headers[HEADER.attempts]).toBe('3');
    expect(decoded.headers[HEADER.delayedAttempts]).toBe('1');
    expect(decoded.headers[HEADER.history]).toBe('[]');
    for (const key of Object.keys(user)) expect(decoded.headers[key]).toBe(user[key]);
    expect(decoded.headers['extra']).toBeUndefined();
    expect(decoded.dropped).toBe(1);
  });

  it('republishes a copy with both budgets full without dropping anything', () => {
    const user = userHeadersAtTheLimit();
    const { table, dropped } = encodeHeaders({ ...user, ...own }, 'lenient');
    expect(dropped).toBe(0);
    expect(table[HEADER.attempts]).toBe('3');
    const size = Object.entries(table).reduce((n, [k, v]) => n + headerEntryBytes(k, v), 0);
    expect(size).toBeLessThanOrEqual(HEADER_LIMITS.maxUserBytes + HEADER_LIMITS.maxOwnBytes);
  });

  it('refuses to send what a consumer would cut: user headers over their budget, redeliver headers over theirs', () => {
    expect(() => encodeHeaders(userHeadersAtTheLimit(), 'strict')).not.toThrow();
    expect(() => encodeHeaders({ ...userHeadersAtTheLimit(), a: '' }, 'strict')).toThrow(RangeError);
    const ownTooBig: Record<string, string> = {};
    for (let i = 0; i * HEADER_LIMITS.maxValueBytes <= HEADER_LIMITS.maxOwnBytes; i++) ownTooBig[`redeliver-x-${i}`] = 'v'.repeat(HEADER_LIMITS.maxValueBytes - 20);
    expect(() => encodeHeaders(ownTooBig, 'strict')).toThrow(/redeliver headers/);
  });

  it('leaves room in amqplib 64 KiB property table for both budgets and the transport headers', () => {
    expect(HEADER_LIMITS.maxUserBytes + HEADER_LIMITS.maxOwnBytes + 2_048).toBeLessThanOrEqual(64 * 1024);
  });
});
