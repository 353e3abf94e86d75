/**
 * Errors that transports raise alike. Each has a distinct `name`, so callers
 * can tell them apart across package copies without `instanceof`, and each
 * message starts with the name of the transport that raised it (`redis: ...`).
 * A transport re-exports the ones it raises from its own entry point.
 */
import { FatalSendError } from './send-errors.js';
import { readProperty } from '../util/thrown.js';
import type { DeliveryGone } from './delivery-gone.js';

/** An operation on a transport after `close()`. A `Producer` never retries it. */
export class TransportClosedError extends FatalSendError {
  override readonly name: string = 'TransportClosedError';
  constructor(
    transport: string,
    readonly operation: string,
  ) {
    super(`${transport}: ${operation} after the transport was closed`);
  }
}

/**
 * A settlement of a delivery this consumer no longer holds; `reason` says
 * why, in the transport's terms. Nothing was changed; the broker gives the
 * message out again, or it is wherever its holder put it.
 */
export class DeliveryGoneError extends Error implements DeliveryGone {
  override readonly name: string = 'DeliveryGoneError';
  readonly deliveryGone = true as const;
  constructor(
    transport: string,
    readonly operation: string,
    readonly messageId: string,
    readonly queue: string,
    reason: string,
  ) {
    super(`${transport}: ${operation} of message ${messageId} on ${queue} ${reason}; nothing changed`);
  }
}

/** A second settlement of a delivery already settled (or being settled): nothing changed. */
export class AlreadySettledError extends Error implements DeliveryGone {
  override readonly name: string = 'AlreadySettledError';
  readonly deliveryGone = true as const;
  constructor(transport: string, readonly queue: string, readonly messageId: string) {
    super(`${transport}: message ${messageId} on ${queue} was already settled; nothing changed`);
  }
}

/** The broker refused a settlement's copy (a key of the wrong type, say): the original stays held. */
export class SettlementRefusedError extends Error {
  override readonly name: string = 'SettlementRefusedError';
  constructor(
    transport: string,
    readonly operation: string,
    readonly messageId: string,
    readonly reply: string,
  ) {
    super(`${transport}: ${operation} of message ${messageId} was refused by the server (${reply}); the message stays held`);
  }
}

/**
 * Whether `error` is a transport's `MessageTooLargeError` (checked by name,
 * as every transport raises its own): the broker refuses the message or
 * copy for its size, so trying it again cannot help.
 */
export function isMessageTooLarge(error: unknown): boolean {
  return readProperty(error, 'name') === 'MessageTooLargeError';
}
