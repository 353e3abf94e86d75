/**
 * Values a handler may throw that are hard to read: each must become a
 * bounded failure summary and follow its policy to the error queue.
 */

/** An error thrown by a hostile value's getter or trap. */
const trapError = () => new Error('read me not');

/** An object whose `message`, `name`, `stack` and conversions all throw. */
function throwingGetters(): unknown {
  return {
    get message(): string {
      throw trapError();
    },
    get name(): string {
      throw trapError();
    },
    get stack(): string {
      throw trapError();
    },
    toString(): string {
      throw trapError();
    },
    [Symbol.toPrimitive](): string {
      throw trapError();
    },
  };
}

/** A Proxy whose every trap (has, get, getPrototypeOf, ownKeys, …) throws. */
function throwingProxy(): unknown {
  const traps = new Proxy({}, { get: () => () => { throw trapError(); } });
  return new Proxy({}, traps);
}

function circularCause(): unknown {
  const error = new Error('circular cause');
  (error as { cause?: unknown }).cause = error;
  return error;
}

function megabyteStack(): unknown {
  const error = new Error('huge stack');
  error.stack = `Error: huge stack\n${'    at frame (file.js:1:1)\n'.repeat(40_000)}`.slice(0, 1024 * 1024);
  return error;
}

/** Each hostile value by name, made fresh on each call. */
export const HOSTILE_VALUES: readonly (readonly [string, () => unknown])[] = [
  ['an object with throwing getters', throwingGetters],
  ['a Proxy that throws on every trap', throwingProxy],
  ['null', () => null],
  ['undefined', () => undefined],
  ['a symbol', () => Symbol('thrown')],
  ['an Error with a circular cause', circularCause],
  ['a 4,096-character non-ASCII message', () => new Error('错'.repeat(4096))],
  ['a 1 MB stack', megabyteStack],
];
