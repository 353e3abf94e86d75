/**
 * A poison message never crashes a worker: a user callback or a store call on
 * the message path that throws ends in a settled message (the error queue,
 * naming the failing part) or a release, never an unhandled rejection.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointOptions } from '../../src/endpoint/options.js';
import { HEADER } from '../../src/headers/names.js';
import type { DeduplicationStore } from '../../src/dedup/types.js';
import { MemoryDeduplicationStore } from '../../src/dedup/memory-store.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { drain, sendJson } from '../support/engine-harness.js';
import { HOSTILE_VALUES } from '../support/hostile-values.js';
import { recordingLogger } from '../support/recording-logger.js';

let unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

/** Runs one message through an endpoint and returns what became of it. */
async function runOne(options: Partial<EndpointOptions<unknown>>) {
  const clock = new FakeClock(0);
  const transport = new MemoryTransport({ clock });
  const logger = recordingLogger();
  const endpoint = new Endpoint<unknown>({ name: 'poison', transport, clock, logger, handler: () => undefined, ...options });
  await sendJson(transport, 'poison', 'm1', {});
  await endpoint.start();
  const s = () => endpoint.stats;
  const settled = await clock.runUntil(() => s().handled + s().deadLettered + s().discarded >= 1 && s().inFlight === 0, 3_600_000);
  await endpoint.stop();
  await new Promise((r) => setImmediate(r));
  const dead = await drain(transport, 'error', clock, s().deadLettered);
  await transport.close();
  return { settled, stats: s(), dead, logger, queueDepth: transport.depth('poison') };
}

describe('a throwing user callback sends the message to the error queue, naming the part', () => {
  it('an unrecoverable predicate that throws', async () => {
    const r = await runOne({
      recoverability: {
        isUnrecoverable: () => {
          throw new Error('predicate bug');
        },
      },
      handler: () => {
        throw new Error('boom');
      },
    });
    expect(r.settled).toBe(true);
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['unrecoverable-predicate']);
    expect(r.logger.lines.some((l) => l.level === 'error' && /unrecoverable-predicate|predicate/.test(l.message))).toBe(true);
    expect(unhandled).toEqual([]);
  });

  it('a delayed backoff that throws', async () => {
    const r = await runOne({
      recoverability: {
        immediateRetries: 0,
        delayedBackoff: () => {
          throw new Error('backoff bug');
        },
      },
      handler: () => {
        throw new Error('boom');
      },
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['backoff']);
    expect(unhandled).toEqual([]);
  });

  it('a delayed backoff that returns garbage', async () => {
    const r = await runOne({
      recoverability: { immediateRetries: 0, delayedBackoff: () => Number.NaN },
      handler: () => {
        throw new Error('boom');
      },
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['backoff']);
  });

  it('a delayed backoff that throws when the handler requeues', async () => {
    const r = await runOne({
      recoverability: {
        delayedBackoff: () => {
          throw new Error('backoff bug');
        },
      },
      handler: (_m, ctx) => ctx.requeue(),
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['backoff']);
    expect(unhandled).toEqual([]);
  });
});

describe('ctx.requeue validates its argument when called', () => {
  it.each([
    ['a negative delay', { delayMs: -1 }],
    ['a NaN delay', { delayMs: Number.NaN }],
    ['a delay above 2^31-1', { delayMs: 2 ** 31 }],
    ['a backoff that is not a boolean', { backoff: 'yes' }],
    ['options that are not an object', 5],
  ])('%s throws a RangeError into the handler, which counts as a handler failure', async (_label, options) => {
    const thrown: unknown[] = [];
    const r = await runOne({
      recoverability: { immediateRetries: 0, delayedRetries: 0 },
      handler: (_m, ctx) => {
        try {
          ctx.requeue(options as never);
        } catch (error) {
          thrown.push(error);
          throw error;
        }
      },
    });
    expect(thrown).toHaveLength(1);
    expect(thrown[0]).toBeInstanceOf(RangeError);
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['retries-exhausted']);
    expect(r.dead[0]!.headers[HEADER.failureErrorName]).toBe('RangeError');
    expect(unhandled).toEqual([]);
  });
});

describe('a failing deduplication store', () => {
  function store(overrides: Partial<DeduplicationStore>): DeduplicationStore {
    const base = new MemoryDeduplicationStore();
    return {
      begin: (...a) => base.begin(...a),
      complete: (...a) => base.complete(...a),
      abandon: (...a) => base.abandon(...a),
      ...overrides,
    };
  }

  it('complete() failing after the handler succeeded: the message is acknowledged, the failure logged', async () => {
    const r = await runOne({
      deduplication: store({
        complete: async () => {
          throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
        },
      }),
    });
    expect(r.stats.handled).toBe(1);
    expect(r.queueDepth).toBe(0);
    expect(r.logger.lines.some((l) => l.level === 'error' && /deduplication store/i.test(l.message))).toBe(true);
    expect(unhandled).toEqual([]);
  });

  it('complete() failing when the policy discards: the message is still discarded', async () => {
    const r = await runOne({
      recoverability: { policy: () => ({ kind: 'discard', reason: 'obsolete' }) },
      handler: () => {
        throw new Error('boom');
      },
      deduplication: store({
        complete: () => {
          throw new Error('disk full');
        },
      }),
    });
    expect(r.stats.discarded).toBe(1);
    expect(unhandled).toEqual([]);
  });
});

describe('a throwing logger', () => {
  it('cannot stop a message from being handled or retried', async () => {
    let calls = 0;
    const fail = () => {
      throw new Error('logger bug');
    };
    const r = await runOne({
      logger: { info: fail, warn: fail, error: fail },
      handler: () => {
        if (++calls < 3) throw new Error('boom');
      },
    });
    expect(r.stats.handled).toBe(1);
    expect(r.stats.immediateRetries).toBe(2);
    expect(unhandled).toEqual([]);
  });
});

describe('a hostile thrown value, with every user part reading it', () => {
  const proxy = () => HOSTILE_VALUES.find(([name]) => name === 'a Proxy that throws on every trap')![1]();
  const getters = () => HOSTILE_VALUES.find(([name]) => name === 'an object with throwing getters')![1]();
  class Known extends Error {}

  it.each([
    ['a Proxy that throws on every trap', proxy],
    ['an object with throwing getters', getters],
  ])('%s: unrecoverable classes, listeners and a logger that read it leave its policy in charge', async (_name, make) => {
    let calls = 0;
    const read = (value: unknown) => String((value as { message: unknown }).message);
    const r = await runOne({
      recoverability: { immediateRetries: 1, delayedRetries: 1, unrecoverable: [Known] },
      logger: { info: (f) => read((f as { err?: unknown }).err), warn: (f) => read((f as { err?: unknown }).err), error: (f) => read((f as { err?: unknown }).err) },
      handler: () => {
        calls++;
        throw make();
      },
    });
    expect(r.settled).toBe(true);
    expect(calls).toBe(4);
    expect(r.dead.map((d) => [d.headers[HEADER.failureReason], d.headers[HEADER.failureMessage]])).toEqual([['retries-exhausted', '[object with a throwing getter]']]);
    expect(unhandled).toEqual([]);
  });

  it('a custom policy that reads it and throws sends the message to the error queue as the policy', async () => {
    const r = await runOne({
      recoverability: { policy: (failure) => ({ kind: 'retry-later', delayMs: String((failure.error as Error).message).length }) },
      handler: () => {
        throw proxy();
      },
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['policy']);
    expect(unhandled).toEqual([]);
  });

  it.each([
    ['a dead-letter without a reason', { kind: 'dead-letter' }],
    ['a discard whose reason is not a string', { kind: 'discard', reason: 42 }],
    ['a Proxy', proxy()],
  ])('a custom policy that answers %s sends the message to the error queue as the policy', async (_name, answer) => {
    const r = await runOne({
      recoverability: { policy: () => answer as never },
      handler: () => {
        throw new Error('boom');
      },
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['policy']);
    expect(unhandled).toEqual([]);
  });

  it('a codec that throws one dead-letters the message as a deserialization failure', async () => {
    const r = await runOne({
      codec: {
        encode: () => new Uint8Array(),
        decode: () => {
          throw proxy();
        },
      },
    });
    expect(r.dead.map((d) => [d.headers[HEADER.failureReason], d.headers[HEADER.failureMessage]])).toEqual([['deserialization', '[object with a throwing getter]']]);
  });

  it('a schema validator that throws one dead-letters the message as a validation failure', async () => {
    const r = await runOne({
      schema: {
        '~standard': {
          version: 1,
          vendor: 'test',
          validate: () => {
            throw proxy();
          },
        },
      },
    });
    expect(r.dead.map((d) => d.headers[HEADER.failureReason])).toEqual(['validation']);
  });
});
