/**
 * NSQ topic and channel names: 1 to 64 characters of letters, digits, `.`,
 * `_` and `-`, optionally ending in `#ephemeral` (nsqd's own rule). A
 * redeliver queue is a topic; a name nsqd would refuse is refused here,
 * before anything is sent, with the rule in the message.
 */
import { FatalSendError } from '../../transport/send-errors.js';

const NAME = /^[.a-zA-Z0-9_-]+(#ephemeral)?$/;

/** A queue, error queue or channel name nsqd would refuse. */
export class InvalidNameError extends FatalSendError {
  override readonly name: string = 'InvalidNameError';
  constructor(
    readonly kind: 'topic' | 'channel',
    readonly value: string,
  ) {
    super(`nsq: ${JSON.stringify(value)} is not a valid ${kind} name: 1 to 64 characters of letters, digits, '.', '_' and '-', optionally ending in '#ephemeral'`);
  }
}

/** Whether nsqd takes `name` as a topic or channel name. */
export function isValidName(name: string): boolean {
  return name.length >= 1 && name.length <= 64 && NAME.test(name);
}

/** Throws an {@link InvalidNameError} (a TypeError for a non-string, naming `what`) unless `name` is a valid NSQ name. */
export function checkName(name: unknown, kind: 'topic' | 'channel', what: string): asserts name is string {
  if (typeof name !== 'string') throw new TypeError(`${what} must be a string`);
  if (!isValidName(name)) throw new InvalidNameError(kind, name);
}
