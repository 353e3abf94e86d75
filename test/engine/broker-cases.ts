/**
 * Endpoint cases every broker's engine test runs the same way: many
 * messages handled once each within the concurrency, and a body that
 * cannot be decoded. Each takes a function that opens a transport the
 * caller closes.
 */
import { expect, it } from 'vitest';
import { constant } from '../../src/backoff/constant.js';
import { jsonCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { Transport } from '../../src/transport/types.js';

/** Polls `predicate` every 10 ms; throws naming `what` after `timeoutMs`. */
export async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Registers the shared cases; `stops` collects each endpoint's stop for the caller's cleanup. */
export function itRunsTheSharedEngineCases(transport: () => Transport, stops: (() => Promise<unknown>)[]): void {
  it('handles each of 300 messages once, some after failing twice, never more than its concurrency at a time', async () => {
    const t = transport();
    const failures = new Map<string, number>();
    const handled = new Set<string>();
    let running = 0;
    let most = 0;
    const endpoint = new Endpoint<{ n: number }>({
      name: 'mixed',
      transport: t,
      concurrency: 8,
      handler: async (message, context) => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 2));
        running--;
        const id = context.messageId;
        if (message.n % 7 === 0 && (failures.get(id) ?? 0) < 2) {
          failures.set(id, (failures.get(id) ?? 0) + 1);
          throw new Error('not yet');
        }
        expect(handled.has(id)).toBe(false);
        handled.add(id);
      },
      recoverability: { immediateRetries: 1, delayedRetries: 2, delayedBackoff: constant(100) },
    });
    stops.push(() => endpoint.stop());
    await endpoint.start();
    for (let n = 0; n < 300; n++) await t.send('mixed', { id: `m-${n}`, body: jsonCodec.encode({ n }), headers: {} });
    await waitFor(() => handled.size === 300, 30_000, `300 handled (have ${handled.size})`);
    expect(most).toBeLessThanOrEqual(8);
    expect(endpoint.stats.deadLettered).toBe(0);
  });

  it('sends a body it cannot decode to the error queue without retrying', async () => {
    const t = transport();
    let calls = 0;
    const endpoint = new Endpoint<unknown>({ name: 'garbled', transport: t, handler: () => void calls++ });
    stops.push(() => endpoint.stop());
    await endpoint.start();
    await t.send('garbled', { id: 'bad', body: new TextEncoder().encode('{"orderId": 7,'), headers: {} });
    await waitFor(() => endpoint.stats.deadLettered === 1, 10_000, 'the dead-letter');
    expect(calls).toBe(0);
    expect(await t.errorQueue!.count('error')).toBeGreaterThanOrEqual(1);
  });
}
