import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

let loaded: typeof PromClient | undefined;

/**
 * prom-client, loaded on first use: it is an optional peer dependency, so
 * an application that never asks for metrics does not need it installed.
 * An application that imports prom-client itself gets the same module.
 */
export function promClient(): typeof PromClient {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)('prom-client') as typeof PromClient;
  } catch (error) {
    throw new Error('redeliver metrics need the prom-client package (an optional peer dependency): npm install prom-client', { cause: error });
  }
  return loaded;
}
