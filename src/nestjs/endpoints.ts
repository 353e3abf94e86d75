import type { BeforeApplicationShutdown, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Endpoint } from '../endpoint/endpoint.js';
import type { EndpointOptions } from '../endpoint/options.js';
import { OptionError } from '../util/option-checks.js';
import type { Transport } from '../transport/types.js';
import { handlesOf, type HandleMetadata } from './handle.js';
import type { ResolvedModuleOptions } from './options.js';

/** One endpoint the module runs, and the method it calls. */
export interface HandlerEndpoint {
  /** The endpoint: its `stats`, `flowState` and events. */
  readonly endpoint: Endpoint<unknown>;
  /** The provider class and method, as `Class.method`. */
  readonly method: string;
  /** The transport's name in `transports`, or undefined for the default transport. */
  readonly transport: string | undefined;
}

/**
 * Runs the endpoints of every `@Handle` method: created and started at
 * application bootstrap, stopped gracefully before application shutdown
 * (while the providers their handlers use are still up), and the
 * transports closed at application shutdown when the module owns them.
 * Injectable, to read the endpoints' stats or listen to their events.
 */
export class RedeliverEndpoints implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  readonly #discovery: DiscoveryService;
  readonly #scanner: MetadataScanner;
  readonly #options: ResolvedModuleOptions;
  #endpoints: HandlerEndpoint[] = [];
  #stopped: Promise<void> | undefined;

  constructor(discovery: DiscoveryService, scanner: MetadataScanner, options: ResolvedModuleOptions) {
    this.#discovery = discovery;
    this.#scanner = scanner;
    this.#options = options;
  }

  /** The endpoints, one per `@Handle`; empty before bootstrap. */
  get endpoints(): readonly HandlerEndpoint[] {
    return this.#endpoints;
  }

  /** Finds every `@Handle` method and starts its endpoint; if one cannot start, stops those started and fails the bootstrap. */
  async onApplicationBootstrap(): Promise<void> {
    this.#endpoints = this.#discover();
    const started: Endpoint<unknown>[] = [];
    try {
      for (const { endpoint } of this.#endpoints) {
        await endpoint.start();
        started.push(endpoint);
      }
    } catch (error) {
      await Promise.allSettled(started.map((e) => e.stop({ timeoutMs: this.#options.stopTimeoutMs })));
      throw error;
    }
  }

  /** Stops every endpoint: no new messages, running handlers finish (within `stopTimeoutMs`). */
  beforeApplicationShutdown(): Promise<void> {
    this.#stopped ??= Promise.allSettled(this.#endpoints.map(({ endpoint }) => endpoint.stop({ timeoutMs: this.#options.stopTimeoutMs }))).then(() => undefined);
    return this.#stopped;
  }

  /** Makes sure the endpoints stopped, then closes the transports if the module owns them. */
  async onApplicationShutdown(): Promise<void> {
    await this.beforeApplicationShutdown();
    if (!this.#options.closeTransports) return;
    const transports = new Set<Transport>([this.#options.transport, ...this.#options.transports.values()]);
    await Promise.all([...transports].map((t) => t.close()));
  }

  #discover(): HandlerEndpoint[] {
    const wrappers = [...this.#discovery.getProviders(), ...this.#discovery.getControllers()];
    const seen = new Set<object>();
    const found: HandlerEndpoint[] = [];
    const queues = new Map<string, string>();
    for (const wrapper of wrappers) {
      const prototype = (wrapper.metatype as { prototype?: object } | null | undefined)?.prototype ?? (wrapper.instance as object | undefined)?.constructor?.prototype;
      if (!prototype) continue;
      const methods = this.#scanner.getAllMethodNames(prototype).filter((name) => handlesOf((prototype as Record<string, unknown>)[name]).length > 0);
      if (methods.length === 0) continue;
      const className = (prototype.constructor as { name: string }).name;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new OptionError(`RedeliverModule: ${className} has @Handle methods but is request-scoped or transient; handlers must be singletons`);
      }
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || seen.has(instance)) continue;
      seen.add(instance);
      for (const name of methods) {
        for (const handle of handlesOf((prototype as Record<string, unknown>)[name])) {
          const entry = this.#create(instance, name, `${className}.${name}`, handle);
          const key = `${entry.transport ?? ''}\u0000${handle.queue}`;
          const other = queues.get(key);
          if (other !== undefined) {
            throw new OptionError(`RedeliverModule: ${entry.method} and ${other} both handle queue '${handle.queue}' on the same transport; give one queue one handler`);
          }
          queues.set(key, entry.method);
          found.push(entry);
        }
      }
    }
    return found;
  }

  #create(instance: Record<string, unknown>, methodName: string, method: string, { queue, options }: HandleMetadata): HandlerEndpoint {
    const { transport: transportName, name, ...settings } = options;
    const transport = transportName === undefined ? this.#options.transport : this.#options.transports.get(transportName);
    if (transport === undefined) {
      const known = [...this.#options.transports.keys()].map((k) => `'${k}'`).join(', ') || 'none';
      throw new OptionError(`RedeliverModule: ${method} names transport '${transportName}', which the module does not have (named transports: ${known})`);
    }
    const defaults = this.#options.endpointDefaults;
    const recoverability = defaults.recoverability || settings.recoverability ? { ...defaults.recoverability, ...settings.recoverability } : undefined;
    const endpointOptions: EndpointOptions<unknown> = {
      ...defaults,
      ...settings,
      ...(recoverability ? { recoverability } : {}),
      name: name ?? queue,
      queue,
      transport,
      handler: async (message, context) => {
        await (instance[methodName] as (m: unknown, c: unknown) => unknown).call(instance, message, context);
      },
    };
    return { endpoint: new Endpoint(endpointOptions), method, transport: transportName };
  }
}
