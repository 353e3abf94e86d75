/**
 * Errors raised by the NSQ transport. Each has a distinct `name`, so callers
 * can tell them apart across package copies without `instanceof`. Input no
 * retry can fix extends `FatalSendError`, so a `Producer` treats it right by
 * its brand alone (see `classifyNsqSendError`). The closed, gone and
 * already-settled errors are the ones every transport shares.
 */
export { TransportClosedError, DeliveryGoneError, AlreadySettledError } from '../../transport/errors.js';
import { FatalSendError } from '../../transport/send-errors.js';

/** A message larger than nsqd's `--max-msg-size`, envelope included: refused before it is sent. */
export class MessageTooLargeError extends FatalSendError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    readonly bytes: number,
    readonly maxMessageBytes: number,
  ) {
    super(`nsq: a message of ${bytes} bytes (body and envelope) is larger than nsqd's --max-msg-size (${maxMessageBytes}); it was not sent`);
  }
}

/** nsqd refused a publish for good (`E_BAD_TOPIC`, `E_BAD_MESSAGE`, `E_INVALID`, ...): the reason is nsqd's. */
export class NsqRefusedError extends FatalSendError {
  override readonly name: string = 'NsqRefusedError';
  constructor(
    readonly code: string,
    readonly reason: string,
    readonly address: string,
  ) {
    super(`nsq: ${address} refused the message: ${code} ${reason}`);
  }
}

/**
 * A publish nsqd could not take now (`E_PUB_FAILED`, `E_MPUB_FAILED`,
 * `E_DPUB_FAILED`: nsqd is exiting or its disk queue is unhealthy), or
 * whose answer never came (a connection that closed, a timeout; nsqd may
 * hold the message). Worth trying again.
 */
export class NsqPublishError extends Error {
  override readonly name: string = 'NsqPublishError';
  constructor(
    readonly code: string | undefined,
    readonly address: string,
    message: string,
  ) {
    super(`nsq: publish to ${address} failed: ${message}`);
  }
}
