/**
 * Reading a value user code threw, which may throw in turn: a getter that
 * throws, a Proxy whose traps throw, a class whose `Symbol.hasInstance`
 * throws. Every read here answers instead of throwing, so a hostile thrown
 * value cannot break the path that settles its message.
 */

/** What {@link readProperty} answers when reading the property threw. */
export const THREW: unique symbol = Symbol('threw');

/** `value[key]` of an object or function; undefined for anything else; {@link THREW} when reading it throws. */
export function readProperty(value: unknown, key: PropertyKey): unknown {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined;
  try {
    return (value as Record<PropertyKey, unknown>)[key];
  } catch {
    return THREW;
  }
}

/** `value instanceof type`, false when asking throws. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function isInstance<C extends abstract new (...args: any[]) => unknown>(value: unknown, type: C): value is InstanceType<C> {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}
