import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { constant } from '../../src/backoff/constant.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { injectTraceContext, tracedHandler, W3CTraceContext } from '../../src/tracing/index.js';
import { headersGetter } from '../../src/tracing/trace-context.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';

describe('tracedHandler', () => {
  let exporter: InMemorySpanExporter;
  let provider: BasicTracerProvider;
  let tracer: Tracer;

  beforeEach(() => {
    exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    tracer = provider.getTracer('test');
  });
  afterEach(async () => {
    await provider.shutdown();
  });

  it('gives a message that fails twice then succeeds three consumer spans, each linked to the producer span', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = new MemoryTransport({ clock });
    let calls = 0;
    const endpoint = new Endpoint<{ orderId: string }>({
      name: 'orders',
      transport,
      clock,
      recoverability: { immediateRetries: 1, delayedRetries: 1, delayedBackoff: constant(5_000) },
      handler: tracedHandler(
        async () => {
          calls++;
          if (calls <= 2) throw new TypeError(`payment service timeout #${calls}`);
        },
        { tracer, system: 'memory' },
      ),
    });

    // The producer's side: a PRODUCER span, its context written into the headers.
    const sendSpan = tracer.startSpan('send orders', { kind: SpanKind.PRODUCER });
    const headers = injectTraceContext({ 'x-tenant': 'acme' }, { context: trace.setSpan(ROOT_CONTEXT, sendSpan) });
    sendSpan.end();
    expect(headers['traceparent']).toBe(`00-${sendSpan.spanContext().traceId}-${sendSpan.spanContext().spanId}-01`);

    await endpoint.start();
    await sendJson(transport, 'orders', 'order-1', { orderId: 'A-1' }, headers);
    expect(await clock.runUntil(() => endpoint.stats.handled === 1, 60_000)).toBe(true);
    await endpoint.stop();
    await transport.close();

    const consumer = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CONSUMER);
    expect(consumer).toHaveLength(3);
    const producer = sendSpan.spanContext();
    for (const span of consumer) {
      expect(span.name).toBe('process orders');
      expect(span.links).toHaveLength(1);
      expect(span.links[0]!.context.traceId).toBe(producer.traceId);
      expect(span.links[0]!.context.spanId).toBe(producer.spanId);
      expect(span.attributes).toMatchObject({
        'messaging.system': 'memory',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'orders',
        'messaging.message.id': 'order-1',
      });
    }
    expect(consumer.map((s) => [s.attributes['redeliver.attempt'], s.attributes['redeliver.immediate_attempt'], s.attributes['redeliver.delayed_attempt']])).toEqual([
      [1, 1, 0],
      [2, 2, 0],
      [3, 1, 1],
    ]);
    const [first, second, third] = consumer;
    for (const failed of [first!, second!]) {
      expect(failed.status.code).toBe(SpanStatusCode.ERROR);
      expect(failed.attributes['error.type']).toBe('TypeError');
      const exception = failed.events.find((e) => e.name === 'exception');
      expect(exception?.attributes?.['exception.type']).toBe('TypeError');
    }
    expect(first!.status.message).toBe('payment service timeout #1');
    expect(third!.status.code).toBe(SpanStatusCode.UNSET);
    expect(third!.events).toEqual([]);
    // The delayed attempt is a new delivery of a copy: the link still leads back to the send.
    expect(third!.attributes['redeliver.delivery_count']).toBe(1);
  });

  it('starts spans without links when the message carries no valid trace context', async () => {
    const handler = tracedHandler(() => undefined, { tracer });
    const context = (headers: Record<string, string>) => ({
      messageId: 'm',
      queue: 'q',
      headers,
      immediateAttempt: 1,
      delayedAttempt: 0,
      attempt: 1,
      deliveryCount: 1,
      deadline: undefined,
      signal: new AbortController().signal,
      requeue: () => undefined,
      extendLease: async () => undefined,
      leaseExpired: () => false,
    });
    await handler(undefined, context({}));
    await handler(undefined, context({ traceparent: 'garbage' }));
    await handler(undefined, context({ traceparent: '00-00000000000000000000000000000000-0000000000000000-01' }));
    await handler(undefined, context({ traceparent: 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }));
    await handler(undefined, context({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra' }));
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(5);
    for (const span of spans) expect(span.links).toEqual([]);
    expect(spans[0]!.attributes['messaging.system']).toBe('redeliver');
  });

  it('rethrows what the handler threw, unchanged, also when it is not an Error', async () => {
    const thrown = { code: 42 };
    const handler = tracedHandler(() => {
      throw thrown;
    }, { tracer });
    await expect(
      handler(undefined, { messageId: 'm', queue: 'q', headers: {}, immediateAttempt: 1, delayedAttempt: 0, attempt: 1, deliveryCount: 1, deadline: undefined, signal: new AbortController().signal, requeue: () => undefined, extendLease: async () => undefined, leaseExpired: () => false }),
    ).rejects.toBe(thrown);
    const [span] = exporter.getFinishedSpans();
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
    expect(span!.attributes['error.type']).toBe('object');
  });
});

describe('W3C trace context in message headers', () => {
  const propagator = new W3CTraceContext();

  it('round-trips traceparent and tracestate, any header case', () => {
    const headers = { Traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=abc,other=1' };
    const extracted = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, headers, headersGetter));
    expect(extracted).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true });
    expect(extracted?.traceState?.get('vendor')).toBe('abc');
    const out = injectTraceContext({}, { context: trace.setSpanContext(ROOT_CONTEXT, extracted!) });
    expect(out).toEqual({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=abc,other=1' });
  });

  it('writes nothing without a valid span', () => {
    expect(injectTraceContext({ a: '1' }, { context: ROOT_CONTEXT })).toEqual({ a: '1' });
    expect(injectTraceContext({ a: '1' })).toEqual({ a: '1' });
  });
});
