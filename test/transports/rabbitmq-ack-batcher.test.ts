/**
 * The ack coalescing of the RabbitMQ transport, against a recording channel:
 * a `multiple` ack never covers a message that is still being handled, and
 * every ack asked for goes out.
 */
import fc from 'fast-check';
import type { Channel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../src/transports/rabbitmq/ack-batcher.js';

type Frame = { kind: 'ack' | 'nack'; tag: number; multiple: boolean };

function recordingChannel(): { channel: Channel; frames: Frame[] } {
  const frames: Frame[] = [];
  const channel = {
    ack: (m: ConsumeMessage, multiple = false) => frames.push({ kind: 'ack', tag: m.fields.deliveryTag, multiple }),
    nack: (m: ConsumeMessage, multiple = false) => frames.push({ kind: 'nack', tag: m.fields.deliveryTag, multiple }),
  } as unknown as Channel;
  return { channel, frames };
}

const message = (tag: number) => ({ fields: { deliveryTag: tag }, properties: {}, content: Buffer.alloc(0) }) as unknown as ConsumeMessage;

/** What the broker considers settled after the frames, as RabbitMQ applies them. */
function brokerSettled(frames: Frame[], delivered: number[]): Set<number> {
  const settled = new Set<number>();
  for (const f of frames) {
    if (f.multiple) for (const t of delivered) if (t <= f.tag) settled.add(t);
    settled.add(f.tag);
  }
  return settled;
}

describe('AckBatcher', () => {
  it('coalesces in-order acks into one multiple ack per flush', () => {
    const { channel, frames } = recordingChannel();
    const acks = new AckBatcher(channel);
    const messages = [1, 2, 3, 4, 5].map(message);
    for (const m of messages) acks.track(m);
    for (const m of messages) acks.ack(m);
    acks.flush();
    expect(frames).toEqual([{ kind: 'ack', tag: 5, multiple: true }]);
  });

  it('acks past an unsettled message one by one, and never with multiple across it', () => {
    const { channel, frames } = recordingChannel();
    const acks = new AckBatcher(channel);
    const messages = [1, 2, 3, 4].map(message);
    for (const m of messages) acks.track(m);
    acks.ack(messages[0]!);
    acks.ack(messages[2]!);
    acks.ack(messages[3]!);
    acks.flush();
    expect(frames).toEqual([
      { kind: 'ack', tag: 1, multiple: true },
      { kind: 'ack', tag: 3, multiple: false },
      { kind: 'ack', tag: 4, multiple: false },
    ]);
    acks.ack(messages[1]!);
    acks.flush();
    expect(frames.at(-1)).toEqual({ kind: 'ack', tag: 2, multiple: true });
  });

  it('keeps its memory bounded while one message is held for a long time', () => {
    const { channel, frames } = recordingChannel();
    const acks = new AckBatcher(channel);
    const held = message(1);
    acks.track(held);
    for (let tag = 2; tag <= 20_000; tag++) {
      const m = message(tag);
      acks.track(m);
      acks.ack(m);
      if (tag % 100 === 0) acks.flush();
    }
    acks.flush();
    // 19,999 messages went through behind the held one; only a bounded tail is remembered.
    expect(acks.size).toBeLessThanOrEqual(2 * 1024 + 1);
    acks.ack(held);
    acks.flush();
    expect(frames.filter((f) => f.multiple)).toEqual([{ kind: 'ack', tag: 1, multiple: true }]);
    expect(brokerSettled(frames, Array.from({ length: 20_000 }, (_, i) => i + 1)).size).toBe(20_000);
    expect(acks.size).toBe(0);
  });

  it('never settles an unsettled message and sends every ack, whatever the order (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('ack', 'ackNow', 'requeue', 'keep'), fc.boolean()), { maxLength: 80 }),
        (count, steps) => {
          const { channel, frames } = recordingChannel();
          const acks = new AckBatcher(channel);
          const messages = Array.from({ length: count }, (_, i) => message(i + 1));
          for (const m of messages) acks.track(m);
          const open = new Set(messages.map((m) => m.fields.deliveryTag));
          const intended = new Set<number>();
          for (const [pick, action, flush] of steps) {
            const tags = [...open];
            const tag = tags[pick % Math.max(1, tags.length)];
            if (tag !== undefined && action !== 'keep') {
              const m = messages[tag - 1]!;
              if (action === 'ack') acks.ack(m);
              else if (action === 'ackNow') acks.ackNow(m);
              else acks.requeue(m);
              open.delete(tag);
              if (action !== 'requeue') intended.add(tag);
            }
            if (flush) acks.flush();
            // Invariant: nothing still open is settled at the broker.
            const settled = brokerSettled(frames, messages.map((m) => m.fields.deliveryTag));
            for (const t of open) expect(settled.has(t)).toBe(false);
          }
          acks.flush();
          const settled = brokerSettled(frames, messages.map((m) => m.fields.deliveryTag));
          for (const t of intended) expect(settled.has(t)).toBe(true);
          for (const t of open) expect(settled.has(t)).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });
});
