import type { Attributes, Link, TextMapPropagator, Tracer } from '@opentelemetry/api';
import type { MessageContext } from '../endpoint/context.js';
import type { Handler } from '../endpoint/options.js';
import { summarizeError } from '../headers/failure.js';
import { isInstance } from '../util/thrown.js';
import { otelApi } from './otel-api.js';
import { headersGetter, W3CTraceContext } from './trace-context.js';

/** Options of {@link tracedHandler}. */
export interface TracedHandlerOptions {
  /** The tracer spans are started with. Default `trace.getTracer('redeliver')` from the globally registered provider. */
  tracer?: Tracer;
  /** The `messaging.system` attribute: the broker, such as `rabbitmq`. Default `redeliver`. */
  system?: string;
  /**
   * How the producer's trace context is read from the message headers.
   * Default W3C Trace Context (`traceparent`, `tracestate`); pass
   * `propagation` from `@opentelemetry/api` to use the process's global propagator.
   */
  propagator?: TextMapPropagator;
  /** More attributes for every span, such as `messaging.consumer.group.name`. Default none. */
  attributes?: Attributes;
}

/** The span attributes redeliver sets besides the messaging semantic conventions. */
export const ATTRIBUTE = {
  attempt: 'redeliver.attempt',
  immediateAttempt: 'redeliver.immediate_attempt',
  delayedAttempt: 'redeliver.delayed_attempt',
  deliveryCount: 'redeliver.delivery_count',
} as const;

/**
 * Wraps an endpoint handler so that each attempt runs in its own CONSUMER
 * span, `process <queue>`, with the messaging semantic conventions and the
 * attempt counters. The span links to the producer's span, read from the
 * message's `traceparent` header: every attempt, immediate or delayed, in
 * this process or another, links back to the same send. A handler that
 * throws ends its span with status error and the exception recorded; the
 * error is rethrown unchanged, so recoverability is not affected.
 */
export function tracedHandler<T>(handler: Handler<T>, options: TracedHandlerOptions = {}): Handler<T> {
  const api = otelApi();
  const tracer = options.tracer ?? api.trace.getTracer('redeliver');
  const system = options.system ?? 'redeliver';
  const propagator = options.propagator ?? new W3CTraceContext();
  const extra = options.attributes ?? {};
  return (message: T, ctx: MessageContext) => {
    const producer = api.trace.getSpanContext(propagator.extract(api.ROOT_CONTEXT, ctx.headers, headersGetter));
    const links: Link[] = producer && api.isSpanContextValid(producer) ? [{ context: producer }] : [];
    const attributes: Attributes = {
      ...extra,
      'messaging.system': system,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': ctx.queue,
      'messaging.message.id': ctx.messageId,
      [ATTRIBUTE.attempt]: ctx.attempt,
      [ATTRIBUTE.immediateAttempt]: ctx.immediateAttempt,
      [ATTRIBUTE.delayedAttempt]: ctx.delayedAttempt,
      [ATTRIBUTE.deliveryCount]: ctx.deliveryCount,
    };
    return tracer.startActiveSpan(`process ${ctx.queue}`, { kind: api.SpanKind.CONSUMER, attributes, links }, async (span) => {
      try {
        await handler(message, ctx);
      } catch (error) {
        const summary = summarizeError(error);
        const isError = isInstance(error, Error);
        span.recordException(isError ? summary : summary.message);
        span.setAttribute('error.type', isError ? summary.name : typeof error);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: summary.message });
        throw error;
      } finally {
        span.end();
      }
    });
  };
}
