import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';
import type { Headers } from '../transport/types.js';
import { otelApi } from './otel-api.js';

/** The W3C Trace Context header that names the producer's span. */
export const TRACEPARENT = 'traceparent';
/** The W3C Trace Context header with vendor-specific trace state. */
export const TRACESTATE = 'tracestate';

const TRACEPARENT_FORMAT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** Reads message headers: the exact name first, then any case (brokers may keep a producer's capitalisation). */
export const headersGetter: TextMapGetter<Readonly<Headers>> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    if (Object.prototype.hasOwnProperty.call(carrier, key)) return carrier[key];
    const lower = key.toLowerCase();
    const found = Object.keys(carrier).find((k) => k.toLowerCase() === lower);
    return found === undefined ? undefined : carrier[found];
  },
};

/** Writes message headers. */
export const headersSetter: TextMapSetter<Headers> = {
  set(carrier, key, value) {
    carrier[key] = value;
  },
};

/**
 * W3C Trace Context (`traceparent`, `tracestate`), the format every
 * OpenTelemetry SDK speaks by default. Built in so that a producer and a
 * consumer agree on the wire format whatever global propagator the process
 * registered (or none).
 */
export class W3CTraceContext implements TextMapPropagator {
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const { trace, isSpanContextValid } = otelApi();
    const span = trace.getSpanContext(context);
    if (!span || !isSpanContextValid(span)) return;
    setter.set(carrier, TRACEPARENT, `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`);
    const state = span.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE, state);
  }

  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const { trace, isSpanContextValid, createTraceState } = otelApi();
    const parent = first(getter.get(carrier, TRACEPARENT));
    if (parent === undefined) return context;
    const match = TRACEPARENT_FORMAT.exec(parent.trim());
    if (!match) return context;
    const [, version, traceId, spanId, flags, rest] = match;
    // Version ff is invalid; version 00 has exactly four fields; later versions may append fields.
    if (version === 'ff' || (version === '00' && rest !== undefined)) return context;
    const spanContext = { traceId: traceId!, spanId: spanId!, traceFlags: Number.parseInt(flags!, 16), isRemote: true };
    if (!isSpanContextValid(spanContext)) return context;
    const state = first(getter.get(carrier, TRACESTATE));
    return trace.setSpanContext(context, state ? { ...spanContext, traceState: createTraceState(state) } : spanContext);
  }

  fields(): string[] {
    return [TRACEPARENT, TRACESTATE];
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

/** Options of {@link injectTraceContext}. */
export interface InjectOptions {
  /** The context whose span the message is sent from. Default the active context. */
  context?: Context;
  /** How trace context is written into headers. Default W3C Trace Context (`traceparent`, `tracestate`). */
  propagator?: TextMapPropagator;
}

/**
 * Writes the current trace context into message headers (W3C `traceparent`
 * and `tracestate` by default), so each consumer attempt can link to the
 * producer's span. Call it with the headers you are about to send; returns
 * the same object. Writes nothing when there is no valid span.
 *
 * ```ts
 * await producer.send('orders', order, { headers: injectTraceContext({}) });
 * ```
 */
export function injectTraceContext(headers: Headers, options: InjectOptions = {}): Headers {
  const api = otelApi();
  (options.propagator ?? new W3CTraceContext()).inject(options.context ?? api.context.active(), headers, headersSetter);
  return headers;
}
