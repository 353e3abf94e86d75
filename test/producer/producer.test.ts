import { describe, expect, it } from 'vitest';
import { Producer } from '../../src/producer/producer.js';
import { SendFailedError } from '../../src/producer/errors.js';
import { FatalSendError, ThrottledError } from '../../src/transport/send-errors.js';
import { HEADER } from '../../src/headers/names.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import type { OutgoingMessage, Transport } from '../../src/transport/types.js';

type Step = 'ok' | 'throttle' | 'transient' | 'fatal' | 'hang';

/** A memory transport whose sends follow a script, recording when each attempt started. */
class ScriptedTransport extends MemoryTransport {
  readonly attempts: { at: number; message: OutgoingMessage }[] = [];
  classifySendError?: Transport['classifySendError'];
  constructor(private readonly clock: FakeClock, private readonly script: Step[]) {
    super({ clock });
  }
  override async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.attempts.push({ at: this.clock.now(), message });
    const step = this.script.shift() ?? 'ok';
    if (step === 'throttle') throw new ThrottledError('530 TOO_MANY_REQUESTS');
    if (step === 'transient') throw new Error('ECONNRESET');
    if (step === 'fatal') throw new FatalSendError('message too large');
    if (step === 'hang') return new Promise(() => undefined);
    return super.send(queue, message);
  }
}

async function settle<T>(clock: FakeClock, promise: Promise<T>): Promise<T> {
  let done = false;
  const tracked = promise.finally(() => {
    done = true;
  });
  tracked.catch(() => undefined);
  await clock.runUntil(() => done, 3_600_000);
  return tracked;
}

describe('producer throttling backoff (RocketMQ schedule)', () => {
  it('waits 1 s, then 1.6 s ± 20 %, 2.56 s ± 20 % ... between throttled attempts', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['throttle', 'throttle', 'throttle', 'throttle', 'ok']);
    const producer = new Producer({ transport, clock, random: seededRandom(3) });
    await settle(clock, producer.send('q', { a: 1 }, { id: 'x' }));
    const gaps = transport.attempts.slice(1).map((a, i) => a.at - transport.attempts[i]!.at);
    expect(gaps[0]).toBe(1_000);
    const bases = [1_600, 2_560, 4_096];
    gaps.slice(1).forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(bases[i]! * 0.8);
      expect(gap).toBeLessThanOrEqual(bases[i]! * 1.2);
    });
    expect(producer.stats).toEqual({ sent: 1, retries: 4, throttled: 4, unavailable: 0, failed: 0 });
    // A throttled send was refused by the broker: not a possible duplicate.
    expect(transport.attempts.at(-1)!.message.headers[HEADER.possibleDuplicate]).toBeUndefined();
  });

  it('caps the base delay at 120 s, jitter included at most 144 s', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, Array<Step>(16).fill('throttle'));
    const producer = new Producer({ transport, clock, random: seededRandom(5), retry: { timeoutMs: 2 ** 31 - 1 } });
    await settle(clock, producer.send('q', 1));
    const gaps = transport.attempts.slice(1).map((a, i) => a.at - transport.attempts[i]!.at);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(144_000);
    expect(gaps.slice(-4).every((g) => g >= 96_000)).toBe(true);
  });

  it('an attempt that outlasts its deadline is followed at once, and each attempt gets at least the minimum time', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['hang', 'throttle', 'ok']);
    const producer = new Producer({ transport, clock, random: seededRandom(1), retry: { minAttemptTimeoutMs: 20_000 } });
    await settle(clock, producer.send('q', 1, { id: 'slow' }));
    expect(transport.attempts.map((a) => a.at)).toEqual([0, 20_000, expect.any(Number)]);
    // The attempt that timed out may have reached the broker: the retry says so.
    expect(transport.attempts[1]!.message.headers[HEADER.possibleDuplicate]).toBe('true');
    expect(transport.attempts.every((a) => a.message.id === 'slow')).toBe(true);
  });

  it('the minimum attempt time is configurable', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['hang', 'ok']);
    const producer = new Producer({ transport, clock, retry: { minAttemptTimeoutMs: 500 } });
    await settle(clock, producer.send('q', 1));
    expect(transport.attempts[1]!.at).toBe(1_000);
  });
});

describe('producer retry classification', () => {
  it('retries transient errors at once up to maxAttempts, then rejects with every attempt listed', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['transient', 'transient', 'transient', 'ok']);
    const producer = new Producer({ transport, clock, retry: { maxAttempts: 3 } });
    const error = await settle(clock, producer.send('q', 1, { id: 'm' })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SendFailedError);
    const failed = error as SendFailedError;
    expect(failed.reason).toBe('attempts-exhausted');
    expect(failed.attempts.map((a) => [a.attempt, a.kind, a.atMs])).toEqual([[1, 'transient', 0], [2, 'transient', 0], [3, 'transient', 0]]);
    expect(failed.message).toContain('ECONNRESET');
    expect(transport.attempts[1]!.message.headers[HEADER.possibleDuplicate]).toBe('true');
  });

  it('does not retry fatal errors', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['fatal', 'ok']);
    const producer = new Producer({ transport, clock });
    const error = (await settle(clock, producer.send('q', 1)).catch((e: unknown) => e)) as SendFailedError;
    expect(error.reason).toBe('fatal');
    expect(transport.attempts).toHaveLength(1);
  });

  it('gives up when the overall time budget would be exceeded', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, Array<Step>(50).fill('throttle'));
    const producer = new Producer({ transport, clock, random: seededRandom(2), retry: { timeoutMs: 10_000 } });
    const error = (await settle(clock, producer.send('q', 1)).catch((e: unknown) => e)) as SendFailedError;
    expect(error.reason).toBe('timeout');
    expect(clock.now()).toBeLessThanOrEqual(10_000);
    expect(error.attempts.length).toBeGreaterThanOrEqual(4);
  });

  it('a transport may classify its own errors', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['transient', 'ok']);
    transport.classifySendError = () => 'fatal';
    const producer = new Producer({ transport, clock });
    const error = (await settle(clock, producer.send('q', 1)).catch((e: unknown) => e)) as SendFailedError;
    expect(error.reason).toBe('fatal');
  });

  it('rejects bad options by name', () => {
    const transport = new MemoryTransport();
    expect(() => new Producer({ transport, retry: { maxAttempts: 0 } })).toThrow(/retry\.maxAttempts/);
    expect(() => new Producer({ transport, retry: { timeoutMs: Infinity } })).toThrow(/retry\.timeoutMs/);
  });
});

describe('sending in the background', () => {
  it('returns the id at once and reports the outcome as an event and to the callback', async () => {
    const clock = new FakeClock(0);
    const transport = new ScriptedTransport(clock, ['throttle', 'ok', 'fatal']);
    const producer = new Producer({ transport, clock, random: seededRandom(1) });
    const events: string[] = [];
    producer.on('sent', (e) => events.push(`sent ${e.messageId} after ${e.attempts}`));
    producer.on('sendFailed', (e) => events.push(`failed ${e.messageId}: ${e.error.reason}`));
    const outcomes: string[] = [];
    const id = producer.sendInBackground('q', 1, { id: 'bg-1' }, (error, sentId) => outcomes.push(`${sentId}:${error ? 'error' : 'ok'}`));
    expect(id).toBe('bg-1');
    expect(events).toEqual([]);
    await clock.runUntil(() => outcomes.length === 1);
    producer.sendInBackground('q', 2, { id: 'bg-2' }, (error, sentId) => outcomes.push(`${sentId}:${error ? 'error' : 'ok'}`));
    await clock.runUntil(() => outcomes.length === 2);
    expect(outcomes).toEqual(['bg-1:ok', 'bg-2:error']);
    expect(events).toEqual(['sent bg-1 after 2', 'failed bg-2: fatal']);
  });
});
