import type { MessageContext } from '../endpoint/context.js';
import type { EndpointOptions } from '../endpoint/options.js';
import { OptionError, queueName } from '../util/option-checks.js';

/**
 * Endpoint settings a handler can carry: every {@link EndpointOptions}
 * field but the ones the module fills in (transport, handler, queue).
 */
export type HandlerSettings<T = unknown> = Omit<EndpointOptions<T>, 'transport' | 'handler' | 'queue' | 'name'>;

/** Options of {@link Handle}: the endpoint's settings, and which transport it consumes. */
export interface HandleOptions<T = unknown> extends HandlerSettings<T> {
  /** The name of one of the module's `transports` to consume from. Default the module's `transport`. */
  transport?: string;
  /** The endpoint's name, in logs, events and failure headers. Default the queue's name. */
  name?: string;
}

/** One `@Handle` on a method. */
export interface HandleMetadata {
  readonly queue: string;
  readonly options: HandleOptions<unknown>;
}

/** The `@Handle` records of each decorated method function. */
const handles = new WeakMap<object, HandleMetadata[]>();

/** The `@Handle` records of `method`, in the order they were applied; empty when it has none. */
export function handlesOf(method: unknown): readonly HandleMetadata[] {
  return (typeof method === 'function' && handles.get(method)) || [];
}

/**
 * Makes a provider method the handler of `queue`: at application bootstrap
 * the `RedeliverModule` finds it, creates an `Endpoint` whose handler calls
 * the method on the provider instance (with its injected dependencies), and
 * starts it; at shutdown it stops the endpoint gracefully. The method gets
 * the decoded message and its `MessageContext`; throwing starts
 * recoverability. A method may carry several `@Handle`s (one endpoint each).
 * @param queue the queue to consume (required, no default).
 * @param options the endpoint's settings and transport (default `{}`: the module's `endpointDefaults` and transport).
 */
export function Handle<T = unknown>(queue: string, options: HandleOptions<T> = {}) {
  queueName('@Handle queue', queue);
  return <M extends (message: T, context: MessageContext) => unknown>(target: object, key: string | symbol, descriptor: TypedPropertyDescriptor<M>): void => {
    const method = descriptor.value;
    if (typeof method !== 'function') {
      throw new OptionError(`@Handle('${queue}') must decorate a method; ${target.constructor.name}.${String(key)} is not one`);
    }
    const list = handles.get(method) ?? [];
    list.push({ queue, options: options as HandleOptions<unknown> });
    handles.set(method, list);
  };
}
