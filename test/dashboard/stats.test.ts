import { describe, expect, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import { RateWindow } from '../../src/dashboard/stats.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { bearer, csrfOf, failingEndpoint, operatorRequest, postHeaders, sendAll, Switch, waitFor } from './support.js';

describe('per-minute rates', () => {
  it('counts increases over the last 60 s, in proportion where an interval straddles the window', () => {
    const w = new RateWindow();
    const at = (s: number, a: number) => w.record(s * 1000, new Map([['a', a]]));
    at(0, 0);
    at(30, 10);
    at(60, 20);
    expect(w.perMinute('a', 60_000)).toBe(20);
    at(90, 20);
    expect(w.perMinute('a', 90_000)).toBe(10);
    at(90.5, 99); // within a second of the last reading: ignored
    expect(w.perMinute('a', 90_000)).toBe(10);
    expect(w.perMinute('missing', 90_000)).toBe(0);

    const sparse = new RateWindow();
    sparse.record(0, new Map([['a', 0]]));
    sparse.record(120_000, new Map([['a', 120]]));
    expect(sparse.perMinute('a', 120_000)).toBe(60);
  });
});

describe('live counters', () => {
  it('reports dead-letters per minute from error-queue counts, and endpoint throughput', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = new MemoryTransport({ clock });
    const poison = new Switch();
    const endpoint = failingEndpoint(transport, poison);
    const dashboard = await createDashboard({ transport, endpoints: [endpoint], clock });
    const request = operatorRequest(() => dashboard.token);
    try {
      await endpoint.start();
      await sendAll(transport, 'orders', [{ n: 1, fail: { name: 'E', message: 'x' } }, { n: 2, fail: { name: 'E', message: 'y' } }, { n: 3, fail: { name: 'E', message: 'z' } }, { n: 4 }, { n: 5 }]);
      await waitFor(() => endpoint.stats.deadLettered === 3 && endpoint.stats.handled === 2);
      await clock.advance(2_000);
      const stats = (await request(`${dashboard.url}api/stats`)).json();
      expect(stats.errorQueues).toEqual([{ name: 'error', count: 3, deadLettersPerMinute: 3 }]);
      expect(stats.endpoints).toEqual([
        expect.objectContaining({
          name: 'orders',
          queue: 'orders',
          running: true,
          perMinute: { handled: 2, immediateRetries: 3, delayedRetries: 0, deadLettered: 3 },
          flow: expect.objectContaining({ backingOff: false, rateLimited: false }),
        }),
      ]);

      // Sending one back lowers the count but is not a negative dead-letter rate.
      const key = (await request(`${dashboard.url}api/entries?errorQueue=error`)).json().entries[0].key;
      poison.poisoned = false;
      const csrf = await csrfOf(dashboard.url, bearer(dashboard.token));
      await request(`${dashboard.url}api/retry`, { method: 'POST', headers: postHeaders(dashboard.url, csrf), body: JSON.stringify({ errorQueue: 'error', key }) });
      await waitFor(() => endpoint.stats.handled === 3);
      await clock.advance(2_000);
      const after = (await request(`${dashboard.url}api/stats`)).json();
      expect(after.errorQueues).toEqual([{ name: 'error', count: 2, deadLettersPerMinute: 3 }]);
      expect(after.endpoints[0].perMinute.handled).toBe(3);

      // A quiet minute later, the rates are back to zero.
      await clock.advance(61_000);
      const quiet = (await request(`${dashboard.url}api/stats`)).json();
      expect(quiet.errorQueues[0].deadLettersPerMinute).toBe(0);
      expect(quiet.endpoints[0].perMinute).toEqual({ handled: 0, immediateRetries: 0, delayedRetries: 0, deadLettered: 0 });
    } finally {
      await dashboard.close();
      await endpoint.stop();
      await transport.close();
    }
  });
});
