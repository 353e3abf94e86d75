/** A RabbitMQ delivery's lease is its channel: expired once that channel closed, unless its queue was deleted (an orphan nobody else can have). */
import type { Channel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { RabbitMqDelivery, type DeliveryOwner } from '../../src/transports/rabbitmq/delivery.js';

function delivery(channel: { stale: boolean; orphaned: boolean }): RabbitMqDelivery {
  const owner = { queue: 'orders', isStale: () => channel.stale, isOrphaned: () => channel.orphaned } as unknown as DeliveryOwner;
  return new RabbitMqDelivery(owner, {} as ConsumeMessage, {} as Channel, 'm-1', {}, 1);
}

describe('RabbitMqDelivery.leaseExpired', () => {
  it('is false while its channel is open, and true once the channel closed', () => {
    const channel = { stale: false, orphaned: false };
    const d = delivery(channel);
    expect(d.leaseExpired()).toBe(false);
    channel.stale = true;
    expect(d.leaseExpired()).toBe(true);
  });

  it('is false for an orphan, whose queue was deleted: it is settled by copy, and no other consumer can have it', () => {
    expect(delivery({ stale: true, orphaned: true }).leaseExpired()).toBe(false);
  });
});
