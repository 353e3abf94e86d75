import { Inject } from '@nestjs/common';
import { Producer } from '../producer/producer.js';

/** The token of the module's resolved options. */
export const REDELIVER_OPTIONS = Symbol('redeliver:options');

/** The token of the transport named `name`, or of the module's default transport when `name` is omitted. */
export function transportToken(name?: string): string {
  return name === undefined ? 'redeliver:transport' : `redeliver:transport:${name}`;
}

/**
 * The token of the producer on the transport named `name`; when `name` is
 * omitted, the `Producer` class itself: the producer on the default transport.
 */
export function producerToken(name?: string): string | typeof Producer {
  return name === undefined ? Producer : `redeliver:producer:${name}`;
}

/**
 * Injects the producer on the transport named `name`, or on the default
 * transport when `name` is omitted (the same as `@Inject(Producer)`).
 * @param name one of the module's `transports` (default none: the default transport).
 */
export function InjectProducer(name?: string): PropertyDecorator & ParameterDecorator {
  return Inject(producerToken(name));
}

/**
 * Injects the transport named `name`, or the default transport when `name` is omitted.
 * @param name one of the module's `transports` (default none: the default transport).
 */
export function InjectTransport(name?: string): PropertyDecorator & ParameterDecorator {
  return Inject(transportToken(name));
}
