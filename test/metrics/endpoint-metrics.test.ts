import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryDeduplicationStore } from '../../src/dedup/memory-store.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { instrumentEndpoint, startMetricsServer, type MetricsServer } from '../../src/metrics/index.js';
import { discard } from '../../src/policy/decision.js';
import { UnrecoverableError } from '../../src/policy/errors.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery, Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';

/** Parses the Prometheus text format into `name{label="value",...}` (labels sorted) → value. */
function parseExposition(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels = [...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => `${m[1]}="${m[2]}"`).sort();
    samples.set(labels.length > 0 ? `${match[1]}{${labels.join(',')}}` : match[1]!, Number(match[3]));
  }
  return samples;
}

/** The sample key of `name` with `labels`, labels sorted as {@link parseExposition} writes them. */
function key(name: string, labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort();
  return `${name}{${parts.join(',')}}`;
}

async function scrape(server: MetricsServer): Promise<Map<string, number>> {
  const res = await fetch(server.url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** A transport whose acks of one message id settle and then report a failure, as a dropped connection would. */
function failingAckFor(inner: Transport, id: string): Transport {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    send: (q, m) => inner.send(q, m),
    close: () => inner.close(),
    consume: (queue, listener, options) =>
      inner.consume(queue, (d: Delivery) => {
        if (d.id !== id) return listener(d);
        listener({
          ...d,
          id: d.id,
          queue: d.queue,
          body: d.body,
          headers: d.headers,
          deliveryCount: d.deliveryCount,
          ack: async () => {
            await d.ack();
            // As a transport reports an ack whose channel closed under it: the delivery is gone.
            throw Object.assign(new Error('channel closed'), { deliveryGone: true });
          },
          retryLater: (ms, h) => d.retryLater(ms, h),
          deadLetter: (q, h) => d.deadLetter(q, h),
          release: () => d.release(),
        });
      }, options),
  };
}

interface Job {
  kind: 'ok' | 'flaky' | 'poison' | 'fatal' | 'requeue' | 'obsolete' | 'settle';
}

describe('endpoint metrics over /metrics', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('counts every outcome exactly, with endpoint, queue and reason labels', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const memory = new MemoryTransport({ clock });
    const transport = failingAckFor(memory, 'settle-1');
    const endpoint = new Endpoint<Job>({
      name: 'billing',
      queue: 'invoices',
      transport,
      clock,
      concurrency: 10,
      deduplication: new MemoryDeduplicationStore(),
      recoverability: {
        immediateRetries: 2,
        delayedRetries: 1,
        policy: (failure, decision) => ((failure.error as Error).message === 'obsolete' ? discard('obsolete') : decision),
      },
      handler: async (job, ctx) => {
        switch (job.kind) {
          case 'poison':
            throw new Error('always fails');
          case 'fatal':
            throw new UnrecoverableError('bad input');
          case 'obsolete':
            throw new Error('obsolete');
          case 'flaky':
            if (ctx.attempt === 1) throw new Error('flaky');
            break;
          case 'requeue':
            if (ctx.delayedAttempt === 0) {
              ctx.requeue({ delayMs: 1_000, backoff: false });
              return;
            }
            break;
        }
        await clock.sleep(250);
      },
    });
    const registry = new Registry();
    const metrics = instrumentEndpoint(endpoint, { registry });
    const server = await startMetricsServer({ registry, port: 0 });
    cleanup.push(() => memory.close(), () => endpoint.stop(), () => server.close(), () => metrics.stop());

    await endpoint.start();
    for (const [id, kind] of [
      ['ok-1', 'ok'],
      ['ok-2', 'ok'],
      ['flaky-1', 'flaky'],
      ['poison-1', 'poison'],
      ['fatal-1', 'fatal'],
      ['requeue-1', 'requeue'],
      ['obsolete-1', 'obsolete'],
      ['settle-1', 'settle'],
      ['dup', 'ok'],
      ['dup', 'ok'], // a second copy while the first is being handled: waits for it, then is a duplicate
    ] as const) {
      await sendJson(memory, 'invoices', id, { kind });
    }
    const done = () => {
      const s = endpoint.stats;
      return s.handled === 5 && s.deadLettered === 2 && s.discarded === 1 && s.duplicates === 1 && s.settlementFailures === 1 && s.inFlight === 0;
    };
    expect(await clock.runUntil(done, 3_600_000)).toBe(true);

    const m = await scrape(server);
    const L = { endpoint: 'billing', queue: 'invoices' };
    expect(m.get(key('redeliver_handled_total', L))).toBe(5);
    expect(m.get(key('redeliver_immediate_retries_total', L))).toBe(5); // flaky 1, poison 2 per round × 2 rounds
    expect(m.get(key('redeliver_delayed_retries_total', L))).toBe(1);
    expect(m.get(key('redeliver_requeued_total', L))).toBe(1);
    expect(m.get(key('redeliver_duplicates_total', L))).toBe(1);
    expect(m.get(key('redeliver_dead_lettered_total', { ...L, reason: 'retries-exhausted' }))).toBe(1);
    expect(m.get(key('redeliver_dead_lettered_total', { ...L, reason: 'unrecoverable' }))).toBe(1);
    expect(m.get(key('redeliver_discarded_total', { ...L, reason: 'obsolete' }))).toBe(1);
    expect(m.get(key('redeliver_settlement_failures_total', { ...L, action: 'ack' }))).toBe(1);

    // Every successful attempt took 250 ms of (fake) time.
    expect(m.get(key('redeliver_handler_duration_seconds_count', L))).toBe(5);
    expect(m.get(key('redeliver_handler_duration_seconds_sum', L))).toBe(1.25);
    expect(m.get(key('redeliver_handler_duration_seconds_bucket', { ...L, le: '0.1' }))).toBe(0);
    expect(m.get(key('redeliver_handler_duration_seconds_bucket', { ...L, le: '0.25' }))).toBe(5);
    expect(m.get(key('redeliver_handler_duration_seconds_bucket', { ...L, le: '+Inf' }))).toBe(5);

    expect(m.get(key('redeliver_consumer_backoff_level', L))).toBe(0);
    expect(m.get(key('redeliver_consumer_backing_off', L))).toBe(0);
    expect(m.get(key('redeliver_rate_limited', L))).toBe(0);
    expect(m.get(key('redeliver_in_flight', L))).toBe(0);
    expect(m.has(key('redeliver_retry_budget_tokens', L))).toBe(false); // no retry budget configured

    // The endpoint's own counters agree.
    expect(endpoint.stats).toMatchObject({ handled: 5, immediateRetries: 5, delayedRetries: 1, requeued: 1, deferred: 0, duplicates: 1, deadLettered: 2, discarded: 1, settlementFailures: 1 });
  });

  it('reads consumer backoff, rate limiting and the retry budget at scrape time', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = new MemoryTransport({ clock });
    const endpoint = new Endpoint<{ n: number }>({
      name: 'sync',
      transport,
      clock,
      recoverability: { immediateRetries: 0, delayedRetries: 3 },
      flowControl: { consumerBackoff: { multiplierMs: 60_000 }, rateLimit: { consecutiveFailures: 1 }, retryBudget: { capacity: 10 } },
      handler: () => {
        throw new Error('database down');
      },
    });
    const registry = new Registry();
    const metrics = instrumentEndpoint(endpoint, { registry, prefix: 'app_' });
    const server = await startMetricsServer({ registry, port: 0, path: '/prom' });
    cleanup.push(() => transport.close(), () => endpoint.stop(), () => server.close(), () => metrics.stop());
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/prom$/);

    await endpoint.start();
    await sendJson(transport, 'sync', 'm-1', { n: 1 });
    expect(await clock.runUntil(() => endpoint.stats.delayedRetries === 1 && endpoint.flowState.backingOff, 1_000)).toBe(true);

    const m = await scrape(server);
    const L = { endpoint: 'sync', queue: 'sync' };
    expect(m.get(key('app_delayed_retries_total', L))).toBe(1);
    expect(m.get(key('app_consumer_backoff_level', L))).toBe(1);
    expect(m.get(key('app_consumer_backing_off', L))).toBe(1);
    expect(m.get(key('app_rate_limited', L))).toBe(1);
    expect(m.get(key('app_consecutive_failures', L))).toBe(1);
    expect(m.get(key('app_retry_budget_tokens', L))).toBe(endpoint.flowState.budgetTokens);

    // Stopped: no longer in the gauges; its counters stay.
    metrics.stop();
    const after = await scrape(server);
    expect(after.has(key('app_consumer_backoff_level', L))).toBe(false);
    expect(after.get(key('app_delayed_retries_total', L))).toBe(1);
    expect((await fetch(server.url.replace('/prom', '/other'))).status).toBe(404);
  });

  it('shares one set of metrics between endpoints in a registry, and refuses to count one twice', async () => {
    const transport = new MemoryTransport();
    const registry = new Registry();
    const a = new Endpoint({ name: 'a', transport, handler: () => undefined });
    const b = new Endpoint({ name: 'b', transport, handler: () => undefined });
    const ma = instrumentEndpoint(a, { registry });
    const mb = instrumentEndpoint(b, { registry });
    expect(() => instrumentEndpoint(a, { registry })).toThrow(/already instrumented/);
    const text = await registry.metrics();
    expect(text).toContain('redeliver_handled_total{endpoint="a",queue="a"} 0');
    expect(text).toContain('redeliver_handled_total{endpoint="b",queue="b"} 0');
    ma.stop();
    mb.stop();
    expect(() => instrumentEndpoint(a, { registry, prefix: 'bad prefix' })).toThrow(TypeError);
  });
});
