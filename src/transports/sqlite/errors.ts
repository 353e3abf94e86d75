/**
 * A settlement arrived after the delivery's lease had ended and another
 * consumer had claimed the message, or after the message had otherwise left
 * the queue. Nothing was changed: the message belongs to its new holder.
 */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;
  /** The queue the delivery came from. */
  readonly queue: string;
  /** The message id. */
  readonly messageId: string;

  constructor(queue: string, messageId: string) {
    super(
      `lease lost on message ${JSON.stringify(messageId)} from queue ${JSON.stringify(queue)}: ` +
        'the lease expired and the message was claimed again, or it was already settled; nothing was changed',
    );
    this.queue = queue;
    this.messageId = messageId;
  }
}

/** A delivery was settled a second time. The first settlement stands; nothing was changed. */
export class AlreadySettledError extends Error {
  override readonly name = 'AlreadySettledError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;

  constructor(queue: string, messageId: string) {
    super(`message ${JSON.stringify(messageId)} from queue ${JSON.stringify(queue)} was already settled by this delivery`);
  }
}

/** The transport was closed before the operation could be written. */
export class TransportClosedError extends Error {
  override readonly name = 'TransportClosedError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;

  constructor(operation: string) {
    super(`SqliteTransport is closed: cannot ${operation}`);
  }
}

/**
 * Another connection (a second worker, the CLI) held the database's write
 * lock for longer than `busyTimeoutMs`. Nothing was changed; the operation
 * may be tried again, and a delivery it was to settle is still held.
 */
export class DatabaseBusyError extends Error {
  override readonly name = 'DatabaseBusyError';
  /** SQLite's result code, so code that checks `code` sees a busy database. */
  readonly code = 'SQLITE_BUSY';

  constructor(waitedMs: number, cause: unknown) {
    super(`the SQLite database stayed locked by another connection for ${waitedMs} ms (busyTimeoutMs); nothing was changed`, { cause });
  }
}
