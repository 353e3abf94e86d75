import { describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { OutgoingMessage } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';

/** A memory transport that records every send. */
class RecordingTransport extends MemoryTransport {
  readonly sent: OutgoingMessage[] = [];
  override async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.sent.push(message);
    return super.send(queue, message);
  }
}

const START = Date.UTC(2026, 0, 1);

describe('send with expiresAt', () => {
  it('carries a Date or epoch milliseconds in redeliver-expires-at, beside the application headers', async () => {
    const clock = new FakeClock(START);
    const transport = new RecordingTransport({ clock });
    const producer = new Producer({ transport, clock });
    await producer.send('q', { n: 1 }, { expiresAt: new Date(START + 60_000), headers: { app: 'x' } });
    await producer.send('q', { n: 2 }, { expiresAt: START + 1 });
    await producer.send('q', { n: 3 });
    expect(transport.sent.map((m) => m.headers)).toEqual([{ app: 'x', [HEADER.expiresAt]: String(START + 60_000) }, { [HEADER.expiresAt]: String(START + 1) }, {}]);
  });

  it('refuses an invalid Date or number with a clear error, and sends nothing', async () => {
    const clock = new FakeClock(START);
    const transport = new RecordingTransport({ clock });
    const producer = new Producer({ transport, clock });
    for (const bad of [new Date('not a date'), Number.NaN, Infinity, -5, 1.5]) {
      await expect(producer.send('q', {}, { expiresAt: bad })).rejects.toThrow(/send: expiresAt must be a valid Date or a whole number of milliseconds since the Unix epoch/);
      expect(() => producer.sendInBackground('q', {}, { expiresAt: bad })).toThrow(RangeError);
    }
    expect(transport.sent).toHaveLength(0);
    expect(producer.stats.sent).toBe(0);
  });

  it('sends a message whose deadline already passed: the endpoint decides what becomes of it', async () => {
    const clock = new FakeClock(START);
    const transport = new RecordingTransport({ clock });
    await new Producer({ transport, clock }).send('q', {}, { expiresAt: START - 1 });
    expect(transport.sent[0]!.headers[HEADER.expiresAt]).toBe(String(START - 1));
  });
});
