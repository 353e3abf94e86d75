/**
 * Outcome records: an endpoint with `replayOutcomeQueue` reports each
 * replayed message it handled and acknowledged, after the ack, once; a
 * record that cannot be sent leaves the message handled, a warn line and an
 * event. Runs on memory and SQLite, replaying through the transport's own
 * error-queue operations.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointEvents } from '../../src/endpoint/events.js';
import { OptionError } from '../../src/util/option-checks.js';
import { HEADER } from '../../src/headers/names.js';
import { decodeReplayOutcome } from '../../src/operations/replay-outcome.js';
import { UnrecoverableError } from '../../src/policy/errors.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery, OutgoingMessage, Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { overrideDelivery } from '../support/delivery-doubles.js';
import { drain, sendJson } from '../support/engine-harness.js';
import { recordingLogger } from '../support/recording-logger.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-replay-outcome-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

type Factory = (clock: FakeClock) => Transport & { errorQueue: NonNullable<Transport['errorQueue']> };
const transports: [string, Factory][] = [
  ['memory', (clock) => new MemoryTransport({ clock })],
  ['sqlite', (clock) => new SqliteTransport({ path: join(dir, `outcome-${++files}.db`), clock })],
];

const OUTCOMES = 'orders.outcomes';

/**
 * The transport as the endpoint sees it: every ack and every send is written
 * to `log` when it has resolved, and sends to the outcome queue go through
 * `sendOutcome` (the real send by default).
 */
function observed(inner: Transport, log: string[], sendOutcome?: (message: OutgoingMessage) => Promise<void>): Transport {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    close: () => inner.close(),
    send: async (queue, message) => {
      if (queue === OUTCOMES && sendOutcome) await sendOutcome(message);
      else await inner.send(queue, message);
      log.push(`send ${queue} ${message.id}`);
    },
    consume: (queue, listener, options) =>
      inner.consume(
        queue,
        (d: Delivery) =>
          listener(
            overrideDelivery(d, {
              ack: async () => {
                await d.ack();
                log.push(`ack ${d.id}`);
              },
            }),
          ),
        options,
      ),
  };
}

describe.each(transports)('replay outcome records on %s', (_name, factory) => {
  async function setUp(options: { sendOutcome?: (message: OutgoingMessage) => Promise<void>; outcomeQueue?: boolean } = {}) {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = factory(clock);
    const log: string[] = [];
    const logger = recordingLogger();
    const failed: EndpointEvents['replayOutcomeFailed'][] = [];
    let broken = true;
    const endpoint = new Endpoint<{ n: number }>({
      name: 'orders',
      transport: observed(transport, log, options.sendOutcome),
      clock,
      logger,
      recoverability: { immediateRetries: 0, delayedRetries: 0 },
      ...(options.outcomeQueue === false ? {} : { replayOutcomeQueue: OUTCOMES }),
      handler: (order) => {
        if (broken && order.n < 0) throw new UnrecoverableError(`order ${order.n} is broken`);
      },
    });
    endpoint.on('replayOutcomeFailed', (e) => failed.push(e));
    await endpoint.start();
    /** Sends a message that fails into the error queue, fixes the handler, and replays it. */
    const replayed = async (id: string) => {
      await sendJson(transport, 'orders', id, { n: -1 });
      await clock.runUntil(() => endpoint.stats.deadLettered >= 1, 60_000);
      const [entry] = await transport.errorQueue.browse('error');
      expect(entry?.messageId).toBe(id);
      broken = false;
      await transport.errorQueue.sendBack('error', entry!.key);
    };
    const handled = (n: number) => clock.runUntil(() => endpoint.stats.handled >= n, 60_000);
    return { clock, transport, endpoint, log, logger, failed, replayed, handled };
  }

  it('sends one record, after the ack, for a replayed message that was handled', async () => {
    const t = await setUp();
    let handledAt = 0;
    t.endpoint.on('handled', () => (handledAt = t.clock.now()));
    await t.replayed('order-1');
    expect(await t.handled(1)).toBe(true);
    await t.endpoint.stop();
    const records = await drain(t.transport, OUTCOMES, t.clock, 2);
    expect(records).toHaveLength(1);
    const record = records[0]!;
    expect(record.id).toBe('order-1:handled:1');
    expect(record.headers[HEADER.outcome]).toBe('handled');
    expect(decodeReplayOutcome(record)).toEqual({
      kind: 'handled',
      messageId: 'order-1',
      replayCount: 1,
      queue: 'orders',
      endpoint: 'orders',
      at: new Date(handledAt).toISOString(),
    });
    expect(t.log).toEqual(['ack order-1', `send ${OUTCOMES} order-1:handled:1`]);
    expect(t.failed).toEqual([]);
    await t.transport.close();
  });

  it('sends no record for a message that was never replayed', async () => {
    const t = await setUp();
    await sendJson(t.transport, 'orders', 'fresh-1', { n: 1 });
    expect(await t.handled(1)).toBe(true);
    await t.endpoint.stop();
    expect(await drain(t.transport, OUTCOMES, t.clock, 1)).toEqual([]);
    expect(t.log).toEqual(['ack fresh-1']);
    await t.transport.close();
  });

  it('sends no record without the option', async () => {
    const t = await setUp({ outcomeQueue: false });
    await t.replayed('order-2');
    expect(await t.handled(1)).toBe(true);
    await t.endpoint.stop();
    expect(await drain(t.transport, OUTCOMES, t.clock, 1)).toEqual([]);
    await t.transport.close();
  });

  it('keeps the message handled when the record cannot be sent: one try, a warn line, an event', async () => {
    let tries = 0;
    const t = await setUp({
      sendOutcome: async () => {
        tries++;
        throw new Error('outcome queue refused');
      },
    });
    await t.replayed('order-3');
    expect(await t.handled(1)).toBe(true);
    await t.endpoint.stop();
    expect(tries).toBe(1);
    expect(t.log).toEqual(['ack order-3']);
    expect(await drain(t.transport, 'orders', t.clock, 1)).toEqual([]);
    expect(await t.transport.errorQueue.count('error')).toBe(0);
    expect(t.failed).toHaveLength(1);
    expect(t.failed[0]).toMatchObject({ messageId: 'order-3', queue: 'orders', outcomeQueue: OUTCOMES, replayCount: 1 });
    expect((t.failed[0]!.error as Error).message).toBe('outcome queue refused');
    const warn = t.logger.lines.find((l) => l.level === 'warn' && l.message.includes('outcome record'));
    expect(warn?.fields).toMatchObject({ messageId: 'order-3', queue: 'orders', outcomeQueue: OUTCOMES });
    expect(warn?.message).toContain('outcome queue refused');
    expect(t.endpoint.stats.handled).toBe(1);
    await t.transport.close();
  });

  it('stop waits for a record still being sent', async () => {
    let finish!: () => void;
    const t = await setUp({ sendOutcome: (message) => new Promise<void>((resolve) => (finish = resolve)).then(() => t.transport.send(OUTCOMES, message)) });
    await t.replayed('order-4');
    expect(await t.handled(1)).toBe(true);
    let stopped = false;
    const stopping = t.endpoint.stop({ timeoutMs: 10_000 }).then(() => (stopped = true));
    await t.clock.advance(5_000);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(t.clock.now()).toBeLessThan(Date.UTC(2026, 0, 1) + 10_000);
    expect(await drain(t.transport, OUTCOMES, t.clock, 1)).toHaveLength(1);
    await t.transport.close();
  });

  it('stop gives up on a record that is never sent once its timeout passes, and says so', async () => {
    const t = await setUp({ sendOutcome: () => new Promise<void>(() => undefined) });
    await t.replayed('order-5');
    expect(await t.handled(1)).toBe(true);
    const started = t.clock.now();
    let stopped = false;
    const stopping = t.endpoint.stop({ timeoutMs: 10_000 }).then(() => (stopped = true));
    expect(await t.clock.runUntil(() => stopped, 20_000)).toBe(true);
    await stopping;
    expect(t.clock.now() - started).toBe(10_000);
    expect(t.logger.lines.some((l) => l.level === 'warn' && l.message.includes('1 outcome record(s) were still being sent'))).toBe(true);
    await t.transport.close();
  });
});

describe('replayOutcomeQueue validation', () => {
  const base = { name: 'orders', transport: new MemoryTransport(), handler: () => undefined };
  it.each([
    ['', /replayOutcomeQueue must be a non-empty string/],
    [42, /replayOutcomeQueue must be a non-empty string/],
    ['x'.repeat(256), /replayOutcomeQueue must be a queue name of 1 to 255 bytes/],
    ['bad\nname', /replayOutcomeQueue must be a queue name/],
    ['orders', /must not be the endpoint's own queue 'orders'/],
    ['error', /must not be the error queue 'error'/],
  ])('refuses %j', (value, message) => {
    expect(() => new Endpoint({ ...base, replayOutcomeQueue: value as string })).toThrow(OptionError);
    expect(() => new Endpoint({ ...base, replayOutcomeQueue: value as string })).toThrow(message);
  });

  it('compares with the configured queue and error queue', () => {
    expect(() => new Endpoint({ ...base, queue: 'in', replayOutcomeQueue: 'orders' }).config.replayOutcomeQueue).not.toThrow();
    expect(() => new Endpoint({ ...base, queue: 'in', replayOutcomeQueue: 'in' })).toThrow(/own queue 'in'/);
    expect(() => new Endpoint({ ...base, recoverability: { errorQueue: 'dead' }, replayOutcomeQueue: 'dead' })).toThrow(/error queue 'dead'/);
    expect(new Endpoint({ ...base, replayOutcomeQueue: 'orders.outcomes' }).config.replayOutcomeQueue).toBe('orders.outcomes');
    expect(new Endpoint(base).config.replayOutcomeQueue).toBeUndefined();
  });
});
