import { MAX_TIMER_MS } from '../time/clock.js';

/** A bad option, named in the message. */
export class OptionError extends TypeError {
  override readonly name = 'OptionError';
}

/** A whole number in [min, max]. */
export function wholeNumber(name: string, value: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new OptionError(`${name} must be a whole number from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

/** A finite duration in milliseconds that a timer can hold: 0 to 2^31-1. */
export function duration(name: string, value: unknown, min = 0): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > MAX_TIMER_MS) {
    throw new OptionError(`${name} must be a finite number of milliseconds from ${min} to ${MAX_TIMER_MS} (2^31-1), got ${describe(value)}`);
  }
  return value;
}

/** A non-empty string. */
export function nonEmpty(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new OptionError(`${name} must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

/**
 * A queue name: 1 to 255 bytes of UTF-8 (the most RabbitMQ accepts) with no
 * control characters.
 */
export function queueName(name: string, value: unknown): string {
  const text = nonEmpty(name, value);
  if (Buffer.byteLength(text, 'utf8') > 255 || /[\u0000-\u001f\u007f]/.test(text)) {
    throw new OptionError(`${name} must be a queue name of 1 to 255 bytes without control characters, got ${describe(value)}`);
  }
  return text;
}

/** A function. */
export function fn<F>(name: string, value: unknown): F {
  if (typeof value !== 'function') throw new OptionError(`${name} must be a function, got ${describe(value)}`);
  return value as F;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  return typeof value;
}
