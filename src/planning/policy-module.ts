import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RecoverabilityOptions } from '../endpoint/options.js';
import type { FlowControlOptions } from '../flow/options.js';

/**
 * The parts of an endpoint's options a plan or a simulation reads. A policy
 * module exports them: the options object an `Endpoint` takes (its other
 * keys, such as `transport` and `handler`, are ignored).
 */
export interface PolicyInput {
  /** As the endpoint's `recoverability`. Default: the endpoint's defaults. */
  recoverability?: RecoverabilityOptions;
  /** As the endpoint's `flowControl`. Default: all off. */
  flowControl?: FlowControlOptions;
  /** As the endpoint's `concurrency`. Default 10. */
  concurrency?: number;
  /** As the endpoint's `leaseMs`. Default 30 000 ms. */
  leaseMs?: number;
}

/** A policy module that cannot be loaded or does not export options. */
export class PolicyModuleError extends Error {
  override readonly name = 'PolicyModuleError';
}

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts']);

/**
 * Loads a policy module: its default export, or else its `options` export,
 * or else the module itself when it exports `recoverability` or
 * `flowControl`. A TypeScript module is loaded through `tsx` when it is
 * installed; otherwise compile it to JavaScript first.
 * @param file the module's path, relative to the working directory (required).
 */
export async function loadPolicyModule(file: string): Promise<PolicyInput> {
  const path = resolve(file);
  if (!existsSync(path)) throw new PolicyModuleError(`policy module ${file} does not exist`);
  const url = pathToFileURL(path).href;
  let loaded: Record<string, unknown>;
  try {
    loaded = TYPESCRIPT.has(extname(path)) ? await importTypeScript(url, file) : ((await import(url)) as Record<string, unknown>);
  } catch (error) {
    if (error instanceof PolicyModuleError) throw error;
    throw new PolicyModuleError(`policy module ${file} could not be loaded: ${error instanceof Error ? error.message : String(error)}`);
  }
  const candidate = [loaded['default'], loaded['options'], loaded].find(isPolicyLike);
  if (!candidate) {
    throw new PolicyModuleError(
      `policy module ${file} exports no endpoint options: export default (or export const options) an object with recoverability and/or flowControl`,
    );
  }
  const { recoverability, flowControl, concurrency, leaseMs } = candidate as PolicyInput;
  return { recoverability, flowControl, concurrency, leaseMs };
}

function isPolicyLike(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  return ['recoverability', 'flowControl', 'concurrency', 'leaseMs'].some((key) => (value as Record<string, unknown>)[key] !== undefined);
}

async function importTypeScript(url: string, file: string): Promise<Record<string, unknown>> {
  let api: { tsImport(specifier: string, parent: string): Promise<unknown> };
  try {
    api = (await import('tsx/esm/api')) as typeof api;
  } catch {
    throw new PolicyModuleError(`policy module ${file} is TypeScript: install tsx (npm install --save-dev tsx) to load it, or compile it to JavaScript`);
  }
  return (await api.tsImport(url, import.meta.url)) as Record<string, unknown>;
}
