import type { DynamicModule, Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Producer } from '../producer/producer.js';
import { RedeliverEndpoints } from './endpoints.js';
import { resolveModuleOptions, type RedeliverModuleAsyncOptions, type RedeliverModuleOptions, type RedeliverModuleScope, type ResolvedModuleOptions } from './options.js';
import { producerToken, REDELIVER_OPTIONS, transportToken } from './tokens.js';

function transportOf(options: ResolvedModuleOptions, name: string | undefined) {
  if (name === undefined) return options.transport;
  const transport = options.transports.get(name);
  if (transport === undefined) throw new Error(`RedeliverModule: transportNames lists '${name}', but the options factory returned no transport of that name`);
  return transport;
}

/** The transport and producer providers of the default transport and of each named one. */
function clientProviders(names: readonly string[]): Provider[] {
  return [undefined, ...names].flatMap((name): Provider[] => [
    { provide: transportToken(name), useFactory: (o: ResolvedModuleOptions) => transportOf(o, name), inject: [REDELIVER_OPTIONS] },
    {
      provide: producerToken(name),
      useFactory: (o: ResolvedModuleOptions) => new Producer({ ...o.producer, transport: transportOf(o, name) }),
      inject: [REDELIVER_OPTIONS],
    },
  ]);
}

function dynamicModule(optionsProvider: Provider, names: readonly string[], scope: RedeliverModuleScope, imports: DynamicModule['imports'] = []): DynamicModule {
  const clients = clientProviders(names);
  return {
    module: RedeliverModule,
    global: scope.global ?? true,
    imports: [DiscoveryModule, ...imports],
    providers: [
      optionsProvider,
      ...clients,
      {
        provide: RedeliverEndpoints,
        useFactory: (discovery: DiscoveryService, scanner: MetadataScanner, options: ResolvedModuleOptions) => new RedeliverEndpoints(discovery, scanner, options),
        inject: [DiscoveryService, MetadataScanner, REDELIVER_OPTIONS],
      },
    ],
    exports: [...clients.map((p) => (p as { provide: string | typeof Producer }).provide), RedeliverEndpoints],
  };
}

/**
 * redeliver in a Nest application: provider methods decorated with
 * `@Handle(queue, options)` become endpoints, started at application
 * bootstrap and stopped gracefully at shutdown; `Producer` (and
 * `@InjectProducer(name)` for named transports) is injectable. Global by
 * default.
 */
export class RedeliverModule {
  /**
   * The module with options known up front.
   * @param options the transports and settings (required).
   * @param scope whether the module is global (default `{ global: true }`).
   */
  static forRoot(options: RedeliverModuleOptions, scope: RedeliverModuleScope = {}): DynamicModule {
    const resolved = resolveModuleOptions(options);
    return dynamicModule({ provide: REDELIVER_OPTIONS, useValue: resolved }, [...resolved.transports.keys()], scope);
  }

  /**
   * The module with options from a factory that may inject other providers
   * (a `ConfigService`) and be async.
   * @param options the factory, what it injects, and the named transports it returns (required).
   * @param scope whether the module is global (default `{ global: true }`).
   */
  static forRootAsync(options: RedeliverModuleAsyncOptions, scope: RedeliverModuleScope = {}): DynamicModule {
    const optionsProvider: Provider = {
      provide: REDELIVER_OPTIONS,
      useFactory: async (...args: unknown[]) => resolveModuleOptions(await options.useFactory(...args)),
      inject: options.inject ?? [],
    };
    return dynamicModule(optionsProvider, options.transportNames ?? [], scope, options.imports);
  }
}
