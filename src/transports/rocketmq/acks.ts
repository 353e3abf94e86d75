/**
 * Acknowledgements of one simple consumer sent several to a request. The
 * proxy's AckMessage takes a list of entries (message id and receipt
 * handle) of one topic and answers each entry with a status of its own;
 * the client's `SimpleConsumer.ack` sends one entry per request. Acks asked
 * for in the same turn of the event loop go out together, at most
 * {@link MAX_ENTRIES} to a request, and each settles by its own entry's
 * status: an ack whose receipt handle ran out fails alone, with the status
 * the client's own `ack` would have thrown.
 */
import { StatusChecker, type SimpleConsumer } from 'rocketmq-client-nodejs';
import service from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb.js';
import definition from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb.js';
import type { MessageView } from './client.js';

/** The most entries one request carries. */
export const MAX_ENTRIES = 32;

/** The proxy's status of a request whose entries each carry their own. */
const MULTIPLE_RESULTS = 30_000;

interface PendingAck {
  readonly view: MessageView;
  readonly receiptHandle: string;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** What the acknowledgements need. */
export interface AckBatchSettings {
  /** The consumer group the messages were received in. */
  readonly group: string;
  /** The longest a request waits for its answer. */
  readonly requestTimeoutMs: number;
  /** The started consumer whose connection the requests go through. */
  readonly consumer: () => Promise<SimpleConsumer>;
}

/** Gathers the acknowledgements of one consumer into requests of several entries. */
export class AckBatch {
  readonly #s: AckBatchSettings;
  #pending: PendingAck[] = [];

  constructor(settings: AckBatchSettings) {
    this.#s = settings;
  }

  /** Acknowledges `view` by its receipt handle as it is now; resolves once the proxy confirmed this entry. */
  ack(view: MessageView): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#pending.length === 0) setImmediate(() => this.#flush());
      this.#pending.push({ view, receiptHandle: view.receiptHandle, resolve, reject });
    });
  }

  #flush(): void {
    const byTopic = new Map<string, PendingAck[]>();
    for (const ack of this.#pending.splice(0)) {
      const same = byTopic.get(ack.view.topic);
      if (same === undefined) byTopic.set(ack.view.topic, [ack]);
      else same.push(ack);
    }
    for (const [topic, acks] of byTopic) {
      for (let i = 0; i < acks.length; i += MAX_ENTRIES) void this.#send(topic, acks.slice(i, i + MAX_ENTRIES));
    }
  }

  async #send(topic: string, acks: readonly PendingAck[]): Promise<void> {
    try {
      const consumer = await this.#s.consumer();
      const request = new service.AckMessageRequest().setGroup(new definition.Resource().setName(this.#s.group)).setTopic(new definition.Resource().setName(topic));
      for (const { view, receiptHandle } of acks) request.addEntries().setMessageId(view.messageId).setReceiptHandle(receiptHandle);
      const response = (await consumer.ackMessageViaRpc(acks[0]!.view.endpoints, request, this.#s.requestTimeoutMs)).toObject();
      if (response.status?.code !== MULTIPLE_RESULTS) StatusChecker.check(response.status);
      const entries = new Map(response.entriesList.map((entry) => [entry.receiptHandle, entry]));
      for (const ack of acks) {
        const entry = entries.get(ack.receiptHandle);
        try {
          if (entry === undefined) {
            if (response.status?.code === MULTIPLE_RESULTS) throw new Error(`rocketmq: the proxy did not answer the ack of message ${ack.view.messageId}`);
          } else StatusChecker.check(entry.status);
          ack.resolve();
        } catch (error) {
          ack.reject(error);
        }
      }
    } catch (error) {
      for (const ack of acks) ack.reject(error);
    }
  }
}
