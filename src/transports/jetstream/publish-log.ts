/**
 * The debug line of a publish the stream acknowledged: where the server
 * says it stored the message. With the hand-out's debug line (each
 * delivery's stream and sequence) it lets a reader match a confirmed send to
 * what the stream later gives out under that sequence.
 */
import type { PubAck } from '@nats-io/jetstream';
import type { Logger } from '../../logger.js';

/** Logs `ack` at debug level for the publish with `Nats-Msg-Id` `msgID`. */
export function logStored(logger: Logger | undefined, ack: PubAck, msgID: string | undefined): void {
  logger?.debug?.(
    { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate, msgId: msgID },
    `jetstream: ${msgID ?? 'a message'} stored in ${ack.stream} at ${ack.seq}${ack.duplicate ? ' (a duplicate of the one stored there)' : ''}`,
  );
}
