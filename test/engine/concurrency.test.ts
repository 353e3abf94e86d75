/**
 * The endpoint enforces its concurrency itself, whatever the transport hands
 * out: after a RabbitMQ reconnection the broker redelivers while the old
 * handlers still run.
 */
import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/endpoint/admission.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { PushTransport } from '../support/delivery-doubles.js';

/** A handler whose calls each wait until the test finishes them, recording concurrency. */
function gatedHandler() {
  const running = new Map<string, number>();
  const finishers = new Map<string, (() => void)[]>();
  const started: string[] = [];
  let now = 0;
  let max = 0;
  let overlap = false;
  return {
    started,
    get max() {
      return max;
    },
    get overlap() {
      return overlap;
    },
    get running() {
      return now;
    },
    finish(id: string) {
      const f = finishers.get(id)?.shift();
      if (!f) throw new Error(`no running handler for ${id}`);
      f();
    },
    handler: async (_m: unknown, ctx: { messageId: string }) => {
      const id = ctx.messageId;
      started.push(id);
      now++;
      max = Math.max(max, now);
      running.set(id, (running.get(id) ?? 0) + 1);
      if (running.get(id)! > 1) overlap = true;
      await new Promise<void>((resolve) => {
        const list = finishers.get(id) ?? [];
        list.push(resolve);
        finishers.set(id, list);
      });
      running.set(id, running.get(id)! - 1);
      now--;
    },
  };
}

/** An endpoint on a {@link PushTransport} whose handlers wait for the test. */
async function startGated(concurrency: number) {
  const clock = new FakeClock(0);
  const transport = new PushTransport();
  const gate = gatedHandler();
  const endpoint = new Endpoint({ name: 'push', transport, clock, concurrency, handler: gate.handler });
  await endpoint.start();
  return { clock, transport, gate, endpoint };
}

describe('the endpoint enforces its concurrency', () => {
  it('never runs more than `concurrency` handlers, nor one id twice at once, when the transport hands out more', async () => {
    const { clock, transport, gate, endpoint } = await startGated(2);
    expect(transport.prefetch).toBe(2);

    const a = transport.push('a');
    const b = transport.push('b');
    const c = transport.push('c');
    const a2 = transport.push('a'); // the same message again, redelivered while its first copy runs
    const d = transport.push('d');
    await clock.advance(0);
    expect(gate.started).toEqual(['a', 'b']);
    // Every delivery the endpoint holds counts, running or waiting.
    expect(endpoint.stats.inFlight).toBe(5);

    gate.finish('b');
    await clock.advance(0);
    expect(b.settledWith).toBe('ack');
    expect(gate.started).toEqual(['a', 'b', 'c']);

    gate.finish('a');
    await clock.advance(0);
    expect(a.settledWith).toBe('ack');
    // The second copy of `a` ran only once the first had finished.
    expect(gate.started).toEqual(['a', 'b', 'c', 'a']);
    expect(endpoint.stats.inFlight).toBe(3);

    // Stopping releases what waits at once and lets the running handlers finish.
    const stopped = endpoint.stop();
    await clock.advance(0);
    expect(d.settledWith).toBe('release');
    expect(endpoint.stats.inFlight).toBe(2);
    gate.finish('c');
    gate.finish('a');
    await stopped;
    expect([c.settledWith, a2.settledWith]).toEqual(['ack', 'ack']);
    expect(gate.started).toEqual(['a', 'b', 'c', 'a']);
    expect(gate.max).toBe(2);
    expect(gate.overlap).toBe(false);
    expect(endpoint.stats).toMatchObject({ handled: 4, inFlight: 0 });
  });

  it('releases a waiting copy of a running id when stopping', async () => {
    const { clock, transport, gate, endpoint } = await startGated(4);
    const first = transport.push('x');
    const second = transport.push('x');
    await clock.advance(0);
    expect(gate.started).toEqual(['x']);
    const stopped = endpoint.stop();
    await clock.advance(0);
    expect(second.settledWith).toBe('release');
    gate.finish('x');
    await stopped;
    expect(first.settledWith).toBe('ack');
    expect(gate.started).toEqual(['x']);
    expect(endpoint.stats.inFlight).toBe(0);
  });
});

describe('a delivery whose lease ran out', () => {
  it('is released, not run, when its slot comes', async () => {
    const { clock, transport, gate, endpoint } = await startGated(1);
    const a = transport.push('a');
    const b = transport.push('b');
    await clock.advance(0);
    expect(gate.started).toEqual(['a']);
    b.expireLease();
    gate.finish('a');
    await clock.advance(0);
    expect([a.settledWith, b.settledWith]).toEqual(['ack', 'release']);
    expect(gate.started).toEqual(['a']);
    expect(endpoint.stats).toMatchObject({ handled: 1, inFlight: 0 });
    await endpoint.stop();
  });

  it('during a failed attempt is released, not retried at once: another consumer may have it', async () => {
    const clock = new FakeClock(0);
    const transport = new PushTransport();
    let calls = 0;
    let x: ReturnType<PushTransport['push']> | undefined;
    const endpoint = new Endpoint({
      name: 'push',
      transport,
      clock,
      recoverability: { immediateRetries: 3 },
      handler: async () => {
        calls++;
        await Promise.resolve(); // the delivery is pushed once this handler is under way
        x!.expireLease();
        throw new Error('failed while its connection was lost');
      },
    });
    await endpoint.start();
    x = transport.push('x');
    await clock.advance(0);
    expect(calls).toBe(1);
    expect(x.settledWith).toBe('release');
    expect(endpoint.stats).toMatchObject({ immediateRetries: 0, deadLettered: 0, inFlight: 0 });
    await endpoint.stop();
  });

  it("is what the handler's ctx.leaseExpired() tells, false until then", async () => {
    const clock = new FakeClock(0);
    const transport = new PushTransport();
    const seen: boolean[] = [];
    let x: ReturnType<PushTransport['push']> | undefined;
    const endpoint = new Endpoint({
      name: 'push',
      transport,
      clock,
      handler: async (_message, ctx) => {
        await Promise.resolve(); // the delivery is pushed once this handler is under way
        seen.push(ctx.leaseExpired());
        x!.expireLease();
        seen.push(ctx.leaseExpired());
      },
    });
    await endpoint.start();
    x = transport.push('x');
    await clock.advance(0);
    expect(seen).toEqual([false, true]);
    await endpoint.stop();
  });

  it('a copy of a running id whose lease ran out is released when that handler finishes', async () => {
    const { clock, transport, gate, endpoint } = await startGated(2);
    transport.push('x');
    const copy = transport.push('x');
    await clock.advance(0);
    copy.expireLease();
    gate.finish('x');
    await clock.advance(0);
    expect(copy.settledWith).toBe('release');
    expect(gate.started).toEqual(['x']);
    await endpoint.stop();
  });
});

describe('Admission', () => {
  it('a waiting copy of a finished id does not start while the limit is 0, and starts once it rises', () => {
    const started: string[] = [];
    const admission = new Admission<{ id: string; n: number }>(1, (d) => started.push(`${d.id}${d.n}`));
    const first = { id: 'a', n: 1 };
    admission.admit(first);
    admission.admit({ id: 'a', n: 2 });
    admission.setLimit(0);
    admission.finished(first);
    expect(started).toEqual(['a1']);
    expect(admission.held).toBe(1);
    admission.setLimit(1);
    expect(started).toEqual(['a1', 'a2']);
  });

  it('hands the freed slot to a waiting copy of the same id first', () => {
    const started: string[] = [];
    const admission = new Admission<{ id: string; n: number }>(1, (d) => started.push(`${d.id}${d.n}`));
    const first = { id: 'a', n: 1 };
    admission.admit(first);
    admission.admit({ id: 'b', n: 1 });
    admission.admit({ id: 'a', n: 2 });
    admission.finished(first);
    expect(started).toEqual(['a1', 'a2']);
  });
});
