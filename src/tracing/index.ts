/**
 * OpenTelemetry tracing for handlers and producers, with @opentelemetry/api
 * (an optional peer dependency, loaded on first use).
 */
export { tracedHandler, ATTRIBUTE, type TracedHandlerOptions } from './traced-handler.js';
export { injectTraceContext, W3CTraceContext, TRACEPARENT, TRACESTATE, type InjectOptions } from './trace-context.js';
