/**
 * An endpoint on RabbitMQ declares its error queue as it starts, before any
 * message fails: on a cluster, a queue first declared by a dead-letter while
 * the cluster is split can be lost when it heals (docs/rabbitmq.md,
 * "Topology"). A queue of this test's own, deleted afterwards.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';

const skip = await rabbitSkipReason();

describe.skipIf(Boolean(skip))('RabbitMQ: the error queue exists from the start', () => {
  const scratch = rabbitScratch('eqstart');
  afterEach(() => scratch.cleanup());

  /** Whether `queue` exists (a passive declaration, on a channel of its own). */
  const exists = async (queue: string): Promise<boolean> => {
    const ch = await scratch.channel();
    try {
      await ch.checkQueue(queue);
      return true;
    } catch {
      return false;
    } finally {
      await ch.close().catch(() => undefined);
    }
  };

  it('an endpoint declares its error queue as it starts, before any failure, and then dead-letters into it', async () => {
    const t = scratch.open();
    const queue = scratch.queueName('work');
    const errorQueue = scratch.queueName('error');
    const endpoint = new Endpoint({
      name: 'eqstart',
      queue,
      transport: t,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
      handler: async () => {
        throw new Error('always fails');
      },
    });
    expect(await exists(errorQueue)).toBe(false);
    await endpoint.start();
    expect(await exists(errorQueue)).toBe(true);
    const deadLettered = new Promise<string>((resolve) => endpoint.on('deadLettered', (e) => resolve(e.messageId)));
    await t.send(queue, { id: 'm-1', body: new TextEncoder().encode('{}'), headers: {} });
    expect(await deadLettered).toBe('m-1');
    expect(await t.errorQueue.count(errorQueue)).toBe(1);
    await endpoint.stop();
  });

  it('a transport closed before the endpoint starts fails the start, naming the call', async () => {
    const t = scratch.open();
    await t.close();
    const endpoint = new Endpoint({ name: 'eqstart', queue: scratch.queueName('closed'), transport: t, handler: async () => undefined });
    await expect(endpoint.start()).rejects.toThrow(/prepareErrorQueue/);
  });
});
