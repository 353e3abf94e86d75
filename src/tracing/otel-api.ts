import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';

let loaded: typeof OtelApi | undefined;

/**
 * @opentelemetry/api, loaded on first use: it is an optional peer
 * dependency, so an application that never traces does not need it
 * installed. The API keeps its state in a process-wide global, so this is
 * the same tracer provider and context manager the application registered.
 */
export function otelApi(): typeof OtelApi {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)('@opentelemetry/api') as typeof OtelApi;
  } catch (error) {
    throw new Error('redeliver tracing needs the @opentelemetry/api package (an optional peer dependency): npm install @opentelemetry/api', { cause: error });
  }
  return loaded;
}
