/**
 * Properties of the headers an endpoint writes: whatever a handler throws
 * (any value fast-check makes, and the hostile ones), its failure summary
 * is made without throwing and within its bounds; and a retry or
 * error-queue copy built from random user headers and a random failure
 * history fits the header budget of every transport that declares one
 * (JetStream), and RabbitMQ's own header tables, keeping redeliver's retry
 * state.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { deadLetterHeaders, summarizeError } from '../../src/headers/failure.js';
import { fitHeaders } from '../../src/headers/fit.js';
import { HEADER, LIMITS } from '../../src/headers/names.js';
import { readRetryState, withRetryState, type FailureRecord, type RetryState } from '../../src/headers/retry-state.js';
import type { Headers, Transport } from '../../src/transport/types.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { decodeHeaders, encodeHeaders, HEADER_LIMITS, headerEntryBytes } from '../../src/transports/rabbitmq/wire-headers.js';
import { HOSTILE_VALUES } from '../support/hostile-values.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Anything a handler may throw: any value, an Error or error-like object
 * with any parts, or a hostile value. Each is made inside the property, by
 * the function generated here: fast-check itself would trip over a hostile
 * value's traps when it looks at what it generated.
 */
const thrown: fc.Arbitrary<() => unknown> = fc.oneof(
  fc
    .anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withNullPrototype: true, withObjectString: true, withSparseArray: true })
    .map((value) => () => value),
  fc.record({ message: fc.anything(), name: fc.anything(), stack: fc.anything() }, { requiredKeys: [] }).map((value) => () => value),
  fc.tuple(fc.string({ unit: 'binary', maxLength: 10_000 }), fc.string({ unit: 'binary', maxLength: 30_000 })).map(([message, stack]) => () => {
    const error = new Error(message);
    error.stack = stack;
    return error;
  }),
  fc.integer({ min: 0, max: HOSTILE_VALUES.length - 1 }).map((index) => HOSTILE_VALUES[index]![1]),
);

describe('summarizeError is total and bounded', () => {
  it('for any thrown value: no throw, strings within their bounds, encodable as UTF-8', () => {
    fc.assert(
      fc.property(thrown, (make) => {
        const summary = summarizeError(make());
        for (const part of [summary.name, summary.message, summary.stack]) {
          expect(typeof part).toBe('string');
          expect(LONE_SURROGATE.test(part)).toBe(false);
        }
        expect(summary.name.length).toBeGreaterThan(0);
        expect(summary.name.length).toBeLessThanOrEqual(200);
        expect(summary.message.length).toBeLessThanOrEqual(LIMITS.messageChars);
        expect(summary.stack.length).toBeLessThanOrEqual(LIMITS.stackChars);
      }),
      { numRuns: 500 },
    );
  });
});

/** Every transport that can be built without a broker, for its limits only: nothing here connects. */
function transportsForLimits(): Transport[] {
  return [new MemoryTransport(), new RabbitMqTransport({ url: 'amqp://127.0.0.1:1' }), new JetStreamTransport({ servers: 'nats://127.0.0.1:1' })];
}

/**
 * User headers taking from nothing to the whole budget `max` as `measure`
 * counts them (often near it, where a copy must be cut to fit), in one to
 * six headers of one- to four-byte characters.
 */
function userHeaders(max: number, measure: (headers: Readonly<Headers>) => number): fc.Arbitrary<Headers> {
  const empty = measure({});
  return fc
    .record({
      names: fc.uniqueArray(fc.stringMatching(/^x-[a-z0-9][a-z0-9-]{0,30}$/), { minLength: 1, maxLength: 6 }),
      char: fc.constantFrom('v', 'é', '错', '😀', ' ', '%'),
      total: fc.oneof(fc.integer({ min: 0, max }), fc.integer({ min: max - 10 * 1024, max: max - 1024 }), fc.integer({ min: max - 30 * 1024, max: max - 2 * 1024 })),
    })
    .map(({ names, char, total }) => {
      const perChar = measure({ x: char.repeat(100) }) - measure({ x: '' });
      const headers: Headers = {};
      for (const name of names) headers[name] = char.repeat(Math.max(0, Math.floor(((total - empty) / names.length - name.length - 4) / (perChar / 100))));
      return headers;
    });
}

const record: fc.Arbitrary<FailureRecord> = fc.record({
  at: fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString()),
  errorName: fc.string({ unit: 'binary', maxLength: 300 }),
  message: fc.string({ unit: 'binary', maxLength: 2_000, size: 'large' }),
  immediateAttempt: fc.integer({ min: 1, max: 1_000 }),
  delayedAttempt: fc.integer({ min: 0, max: 1_000 }),
});

const state: fc.Arbitrary<RetryState> = fc.record({
  attempts: fc.integer({ min: 1, max: 1_000_000 }),
  delayedAttempts: fc.integer({ min: 0, max: 1_000_000 }),
  lastDelayMs: fc.option(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { nil: undefined }),
  delayedElapsedMs: fc.integer({ min: 0, max: 1e12 }),
  history: fc.array(record, { maxLength: LIMITS.historyEntries + 3, size: 'large' }),
  deadlineAt: fc.option(fc.integer({ min: 0, max: 8.64e15 }), { nil: undefined }),
});

/** The retry state a copy's headers carry, the history aside (a budget may drop its oldest entries). */
const counters = (s: RetryState) => ({ attempts: s.attempts, delayedAttempts: s.delayedAttempts, lastDelayMs: s.lastDelayMs, delayedElapsedMs: s.delayedElapsedMs, deadlineAt: s.deadlineAt });

/** An error-queue copy of a message with `user` headers and retry state `written`, after a handler threw `make()`. */
const deadLetterCopy = (user: Headers, written: RetryState, make: () => unknown, reason: string) =>
  deadLetterHeaders(user, { reason, error: summarizeError(make()), at: new Date(0), queue: 'orders', endpoint: 'orders', host: 'host', immediateAttempts: 1, state: written });

describe('copies fit the header budget', () => {
  const transports = transportsForLimits();
  const budgeted = transports.filter((t) => t.limits?.maxHeaderBytes !== undefined && t.limits.headerBytes !== undefined);

  it('is declared by at least one transport (JetStream)', () => {
    expect(budgeted.map((t) => t.name)).toContain('jetstream');
  });

  afterAll(async () => {
    for (const transport of transports) await transport.close();
  });

  for (const transport of budgeted) {
    const { maxHeaderBytes: max, headerBytes: measure } = transport.limits as Required<Pick<NonNullable<Transport['limits']>, 'maxHeaderBytes' | 'headerBytes'>>;

    /**
     * Checks a copy cut by fitHeaders: it fits whenever its headers without
     * history and stack do (else it has neither left), its retry counters
     * and user headers are untouched, and its history is the newest part of
     * the one written.
     */
    const checkFitted = (built: Headers, fitted: Headers, user: Headers, written: RetryState) => {
      const bare = { ...built };
      delete bare[HEADER.history];
      delete bare[HEADER.failureStack];
      if (measure(bare) <= max) expect(measure(fitted)).toBeLessThanOrEqual(max);
      else expect(fitted).toEqual(bare);
      const read = readRetryState(fitted);
      expect(counters(read)).toEqual(counters(written));
      const full = readRetryState(built).history;
      expect(full.slice(full.length - read.history.length)).toEqual(read.history);
      for (const [name, value] of Object.entries(user)) expect(fitted[name]).toBe(value);
    };

    it(`${transport.name}: a retry copy from random user headers and history fits its ${max} bytes and keeps the retry state`, () => {
      fc.assert(
        fc.property(userHeaders(max, measure), state, (user, written) => {
          const built = withRetryState(user, written);
          checkFitted(built, fitHeaders(built, transport.limits!), user, written);
        }),
        { numRuns: 300 },
      );
    });

    it(`${transport.name}: an error-queue copy from random user headers, history and thrown value fits its ${max} bytes and keeps the retry state`, () => {
      fc.assert(
        fc.property(userHeaders(max, measure), state, thrown, fc.string({ maxLength: 300 }), (user, written, make, reason) => {
          const built = deadLetterCopy(user, written, make, reason);
          const fitted = fitHeaders(built, transport.limits!);
          checkFitted(built, fitted, user, written);
          expect(fitted[HEADER.failureReason]).toBe(built[HEADER.failureReason]);
          expect(fitted[HEADER.failureMessage]).toBe(built[HEADER.failureMessage]);
        }),
        { numRuns: 200 },
      );
    });
  }
});

/**
 * User headers a RabbitMQ `send` accepts, from none to its whole user-header
 * budget (counted as the AMQP table encodes them), each value within its
 * byte bound.
 */
const rabbitUserHeaders: fc.Arbitrary<Headers> = fc
  .record({
    char: fc.constantFrom('v', 'é', '错', '😀'),
    total: fc.oneof(fc.integer({ min: 0, max: HEADER_LIMITS.maxUserBytes }), fc.constant(HEADER_LIMITS.maxUserBytes)),
  })
  .map(({ char, total }) => {
    const headers: Headers = {};
    let left = total;
    for (let i = 0; left > headerEntryBytes(`x-app-${i}`, ''); i++) {
      const name = `x-app-${i}`;
      const chars = Math.floor(Math.min(HEADER_LIMITS.maxValueBytes, left - headerEntryBytes(name, '')) / Buffer.byteLength(char));
      headers[name] = char.repeat(chars);
      left -= headerEntryBytes(name, headers[name]!);
      if (chars === 0) break;
    }
    return headers;
  });

describe("RabbitMQ's header tables", () => {
  /** What a consumer reads of a copy the transport publishes with `headers` (lenient: a copy always goes out). */
  const republished = (headers: Headers) => decodeHeaders(encodeHeaders(headers, 'lenient').table);

  it('a retry or error-queue copy from user headers up to the user budget keeps every user header and the retry state, within 64 KiB', () => {
    fc.assert(
      fc.property(rabbitUserHeaders, state, thrown, fc.string({ maxLength: 300 }), (user, written, make, reason) => {
        expect(() => encodeHeaders(user, 'strict')).not.toThrow();
        for (const built of [withRetryState(user, written), deadLetterCopy(user, written, make, reason)]) {
          const { table } = encodeHeaders(built, 'lenient');
          const tableBytes = Object.entries(table).reduce((n, [k, v]) => n + headerEntryBytes(k, v), 0);
          expect(tableBytes).toBeLessThanOrEqual(HEADER_LIMITS.maxUserBytes + HEADER_LIMITS.maxOwnBytes);
          const read = republished(built).headers;
          expect(counters(readRetryState(read))).toEqual(counters(written));
          for (const [name, value] of Object.entries(user)) expect(read[name]).toBe(value);
          if (built[HEADER.failureReason] !== undefined) expect(read[HEADER.failureReason]).toBe(built[HEADER.failureReason]);
        }
      }),
      { numRuns: 200 },
    );
  });
});
