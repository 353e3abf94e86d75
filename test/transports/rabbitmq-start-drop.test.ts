/**
 * A connection that drops while an endpoint starts on RabbitMQ (a node of a
 * cluster restarting as the fault suite's partition rows heal) is repaired
 * as a later drop is: the error queue's declaration and the consumer are
 * made on the next connection, and the start resolves. Before, the start
 * rejected with amqplib's "Channel ended, no reply will be forthcoming".
 * The drop is made where it hurts: the socket is destroyed just as the
 * transport declares the queue named. Queues of this test's own, deleted
 * afterwards.
 */
import type { Channel } from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';

const skip = await rabbitSkipReason();

type Declare = (this: Channel, queue: string, ...rest: unknown[]) => Promise<unknown>;

describe.skipIf(Boolean(skip))('RabbitMQ: a connection dropped while an endpoint starts', () => {
  const scratch = rabbitScratch('startdrop');
  let restore: (() => void) | undefined;
  afterEach(async () => {
    restore?.();
    restore = undefined;
    await scratch.cleanup();
  });

  /**
   * Makes the first declaration (active or passive) of `queue`, on any
   * channel of this process, destroy its connection's socket once sent, so
   * its reply never comes; resolves
   * how many drops it made. Every amqplib channel shares one prototype.
   */
  async function dropOnFirstDeclarationOf(queue: string): Promise<{ drops: number }> {
    const ch = await scratch.channel();
    const proto = Object.getPrototypeOf(ch) as Record<'assertQueue' | 'checkQueue', Declare>;
    await ch.close();
    const counter = { drops: 0 };
    const originals = { assertQueue: proto.assertQueue, checkQueue: proto.checkQueue };
    for (const method of ['assertQueue', 'checkQueue'] as const) {
      const original = originals[method];
      proto[method] = function (this: Channel, name: string, ...rest: unknown[]) {
        const reply = original.call(this, name, ...rest);
        if (name === queue && counter.drops === 0) {
          counter.drops++;
          (this as unknown as { connection: { stream: { destroy(error: Error): void } } }).connection.stream.destroy(new Error('the test drops the connection'));
        }
        return reply;
      };
    }
    restore = () => Object.assign(proto, originals);
    return counter;
  }

  const fastReconnect = { reconnect: () => 100 };

  for (const which of ['work', 'error'] as const) {
    it(`the start resolves when the ${which} queue's declaration meets the drop, and the endpoint then handles and dead-letters`, async () => {
      const t = scratch.open(fastReconnect);
      const queue = scratch.queueName('work');
      const errorQueue = scratch.queueName('error');
      const counter = await dropOnFirstDeclarationOf(which === 'work' ? queue : errorQueue);
      const handled: string[] = [];
      const endpoint = new Endpoint({
        name: 'startdrop',
        queue,
        transport: t,
        recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
        handler: async (_message, context) => {
          handled.push(context.messageId);
          if (context.messageId === 'fails') throw new Error('always fails');
        },
      });
      await endpoint.start();
      expect(counter.drops).toBe(1);
      const deadLettered = new Promise<string>((resolve) => endpoint.on('deadLettered', (e) => resolve(e.messageId)));
      await t.send(queue, { id: 'ok', body: new TextEncoder().encode('{}'), headers: {} });
      await t.send(queue, { id: 'fails', body: new TextEncoder().encode('{}'), headers: {} });
      expect(await deadLettered).toBe('fails');
      await expect.poll(() => handled.slice().sort()).toEqual(['fails', 'ok']);
      expect(await t.errorQueue.count(errorQueue)).toBe(1);
      await endpoint.stop();
    });
  }
});
