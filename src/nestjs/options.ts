import type { FactoryProvider, ModuleMetadata } from '@nestjs/common';
import { DEFAULTS } from '../defaults.js';
import { duration, nonEmpty, OptionError } from '../util/option-checks.js';
import type { ProducerOptions } from '../producer/producer.js';
import type { Transport } from '../transport/types.js';
import type { HandlerSettings } from './handle.js';

/** Options of `RedeliverModule.forRoot`, and what the `forRootAsync` factory returns. */
export interface RedeliverModuleOptions {
  /** The default transport: handlers and the injected `Producer` use it unless they name another. Required. */
  transport: Transport;
  /** More transports by name, for `@Handle(queue, { transport: name })`, `@InjectProducer(name)` and `@InjectTransport(name)`. Default none. */
  transports?: Readonly<Record<string, Transport>>;
  /**
   * Whether the module owns its transports: when true it closes every
   * transport given to it at application shutdown, after all its endpoints
   * have stopped. Set false for a transport also used outside Nest, and close
   * it yourself after `app.close()`. Default true.
   */
  closeTransports?: boolean;
  /**
   * Endpoint settings every `@Handle` starts from (logger, clock, random,
   * recoverability, flow control ...). A handler's own options override
   * them field by field, and `recoverability` field by field too.
   * Default none: the endpoint defaults.
   */
  endpointDefaults?: HandlerSettings<unknown>;
  /** Settings of the injected producers (codec, retry, clock, random, logger). Default the producer defaults. */
  producer?: Omit<ProducerOptions<unknown>, 'transport'>;
  /** How long shutdown lets running handlers finish before their deliveries are released (`Endpoint.stop`'s `timeoutMs`). Default 30 000 ms. */
  stopTimeoutMs?: number;
}

/** Options of `RedeliverModule.forRootAsync`. */
export interface RedeliverModuleAsyncOptions {
  /** Modules that export what `useFactory` injects. Default none. */
  imports?: ModuleMetadata['imports'];
  /** Returns the module's options; receives the providers listed in `inject`. Required. */
  useFactory: (...args: any[]) => RedeliverModuleOptions | Promise<RedeliverModuleOptions>;
  /** Providers passed to `useFactory`, in order. Default none. */
  inject?: FactoryProvider['inject'];
  /**
   * The names of the `transports` the factory returns, so that
   * `@InjectProducer(name)` and `@InjectTransport(name)` can be provided
   * before the factory runs. Handlers can use any name the factory returns.
   * Default none.
   */
  transportNames?: readonly string[];
}

/** Whether the module is global (its producers and transports injectable everywhere), for `forRoot` and `forRootAsync`. */
export interface RedeliverModuleScope {
  /** Register the module as global. Default true. */
  global?: boolean;
}

/** The options after checking. */
export interface ResolvedModuleOptions {
  readonly transport: Transport;
  readonly transports: ReadonlyMap<string, Transport>;
  readonly closeTransports: boolean;
  readonly endpointDefaults: HandlerSettings<unknown>;
  readonly producer: Omit<ProducerOptions<unknown>, 'transport'>;
  readonly stopTimeoutMs: number;
}

function isTransport(value: unknown): value is Transport {
  const t = value as Partial<Transport> | null;
  return typeof t === 'object' && t !== null && typeof t.consume === 'function' && typeof t.send === 'function' && typeof t.close === 'function';
}

/** Checks the module's options and fills in the defaults. */
export function resolveModuleOptions(options: RedeliverModuleOptions): ResolvedModuleOptions {
  if (typeof options !== 'object' || options === null) throw new OptionError('RedeliverModule: options must be an object');
  if (!isTransport(options.transport)) throw new OptionError('RedeliverModule: transport must be a Transport (send, consume, close)');
  const transports = new Map<string, Transport>();
  for (const [name, transport] of Object.entries(options.transports ?? {})) {
    nonEmpty('RedeliverModule: a transports name', name);
    if (!isTransport(transport)) throw new OptionError(`RedeliverModule: transports.${name} must be a Transport (send, consume, close)`);
    transports.set(name, transport);
  }
  return {
    transport: options.transport,
    transports,
    closeTransports: options.closeTransports ?? true,
    endpointDefaults: options.endpointDefaults ?? {},
    producer: options.producer ?? {},
    stopTimeoutMs: duration('RedeliverModule: stopTimeoutMs', options.stopTimeoutMs ?? DEFAULTS.stopTimeoutMs),
  };
}
