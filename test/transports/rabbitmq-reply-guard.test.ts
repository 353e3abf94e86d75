/**
 * The broker-reply timeout of the RabbitMQ transport's error-queue
 * operations and queue inspection, with a fake clock: it measures the wait
 * on the monotonic clock, so a step of the wall clock neither stretches it
 * nor fires it early.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/time/fake-clock.js';
import { BrokerStallError, ReplyGuard } from '../../src/transports/rabbitmq/queue-access.js';

const TIMEOUT_MS = 10_000;
const HOUR_MS = 3600_000;

/** A reply that never comes, and what became of the guarded request. */
function unanswered(guard: ReplyGuard): { outcome: () => unknown } {
  let outcome: unknown = 'pending';
  guard.request('check queue q', new Promise<never>(() => undefined)).catch((error: unknown) => {
    outcome = error;
  });
  return { outcome: () => outcome };
}

describe('ReplyGuard', () => {
  it('fails a request after its timeout even when the wall clock stepped back an hour', async () => {
    const clock = new FakeClock(1_700_000_000_000);
    const guard = new ReplyGuard(clock, TIMEOUT_MS);
    const request = unanswered(guard);
    clock.stepWall(-HOUR_MS);
    await clock.advance(TIMEOUT_MS);
    expect(request.outcome()).toBeInstanceOf(BrokerStallError);
    guard.stop();
  });

  it('does not fail a request early when the wall clock stepped forward an hour', async () => {
    const clock = new FakeClock(1_700_000_000_000);
    const guard = new ReplyGuard(clock, TIMEOUT_MS);
    await clock.advance(TIMEOUT_MS - 1000); // the guard's timer wakes 1 s after the request
    const request = unanswered(guard);
    clock.stepWall(HOUR_MS);
    await clock.advance(1000);
    expect(request.outcome()).toBe('pending');
    await clock.advance(TIMEOUT_MS - 1000);
    expect(request.outcome()).toBeInstanceOf(BrokerStallError);
    guard.stop();
  });
});
