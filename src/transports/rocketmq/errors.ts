/**
 * Errors raised by the RocketMQ transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * Input no retry can fix extends `FatalSendError`, so a `Producer` treats it
 * right by its brand alone (see `classifyRocketMqSendError`). The errors
 * every transport raises alike come from `transport/errors.ts`, re-exported
 * here.
 */
import { FatalSendError } from '../../transport/send-errors.js';

export { AlreadySettledError, DeliveryGoneError, SettlementRefusedError, TransportClosedError } from '../../transport/errors.js';

/**
 * A message body larger than the proxy accepts (`maxMessageSize`), or
 * headers that take more than its user properties may (`part`
 * `'properties'`): refused before it is sent.
 */
export class MessageTooLargeError extends FatalSendError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    readonly bytes: number,
    readonly maxBytes: number,
    /** What is too large: the body, or the headers as message properties. */
    readonly part: 'body' | 'properties' = 'body',
  ) {
    super(
      part === 'body'
        ? `rocketmq: a message body of ${bytes} bytes is larger than the proxy accepts (${maxBytes}); it was not sent`
        : `rocketmq: headers of ${bytes} bytes as message properties are more than the proxy accepts (${maxBytes}); it was not sent`,
    );
  }
}

/** A topic that exists with a message type that allows no delayed messages: redeliver cannot hold its retries there. */
export class TopicTypeError extends FatalSendError {
  override readonly name: string = 'TopicTypeError';
  constructor(
    readonly topic: string,
    readonly messageType: string,
  ) {
    super(
      `rocketmq: topic ${topic} has message.type=${messageType}, which allows no delayed messages; ` +
        `redeliver needs MIXED (or DELAY): mqadmin updateTopic -t ${topic} -a +message.type=MIXED, or use another topic`,
    );
  }
}
