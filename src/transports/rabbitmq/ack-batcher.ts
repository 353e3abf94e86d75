/**
 * Acks on one consumer channel, coalesced. Acks asked for during one turn of
 * the event loop go out at the end of it as a single `basic.ack` with
 * `multiple` set, covering the longest run of settled messages from the
 * oldest outstanding one; acks past a message still being handled go out one
 * by one. A `multiple` ack is sent only up to a tag below which every
 * message this channel received is settled, so it never acks a message the
 * application has not finished with. Requeues (nacks) go out at once.
 *
 * Like every AMQP 0-9-1 ack, a coalesced ack is not confirmed by the broker:
 * if the channel closes before it is written (less than one event-loop turn),
 * the broker redelivers the message, a duplicate, never a loss.
 */
import type { Channel, ConsumeMessage } from 'amqplib';

type EntryState = 'open' | 'ack' | 'done';

/** Entries kept before the list is compacted. */
const COMPACT_AFTER = 1024;

interface Entry {
  readonly message: ConsumeMessage;
  state: EntryState;
}

export class AckBatcher {
  /** Outstanding messages in delivery order, from `#head`. */
  #entries: Entry[] = [];
  #head = 0;
  readonly #byTag = new Map<number, Entry>();
  #scheduled = false;
  #closed = false;
  #compactAt = COMPACT_AFTER;

  constructor(readonly channel: Channel) {}

  /** Messages remembered: outstanding ones, and settled ones not yet dropped. */
  get size(): number {
    return this.#byTag.size;
  }

  /** Records a message the channel received; it stays outstanding until settled here. */
  track(message: ConsumeMessage): void {
    const entry: Entry = { message, state: 'open' };
    this.#entries.push(entry);
    this.#byTag.set(message.fields.deliveryTag, entry);
  }

  #entry(message: ConsumeMessage): Entry {
    const entry = this.#byTag.get(message.fields.deliveryTag);
    if (!entry || entry.message !== message || entry.state !== 'open') {
      throw new Error(`rabbitmq: delivery tag ${message.fields.deliveryTag} is not outstanding on this channel`);
    }
    return entry;
  }

  /** Acks at the end of this event-loop turn, coalesced with other acks. */
  ack(message: ConsumeMessage): void {
    this.#assertOpen();
    this.#entry(message).state = 'ack';
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Acks now, on its own (a settlement whose copy was just confirmed). */
  ackNow(message: ConsumeMessage): void {
    this.#assertOpen();
    const entry = this.#entry(message);
    this.channel.ack(message, false);
    entry.state = 'done';
  }

  /** Gives the message back to the queue now. */
  requeue(message: ConsumeMessage): void {
    this.#assertOpen();
    const entry = this.#entry(message);
    this.channel.nack(message, false, true);
    entry.state = 'done';
  }

  /** Writes every pending ack. Called at the end of each turn and before the channel is closed. */
  flush(): void {
    this.#scheduled = false;
    if (this.#closed) return;
    const entries = this.#entries;
    let lastAck: Entry | undefined;
    while (this.#head < entries.length && entries[this.#head]!.state !== 'open') {
      const entry = entries[this.#head]!;
      if (entry.state === 'ack') lastAck = entry;
      this.#byTag.delete(entry.message.fields.deliveryTag);
      this.#head++;
    }
    try {
      if (lastAck) this.channel.ack(lastAck.message, true);
      for (let i = this.#head; i < entries.length; i++) {
        const entry = entries[i]!;
        if (entry.state === 'ack') {
          this.channel.ack(entry.message, false);
          entry.state = 'done';
        }
      }
    } catch {
      // The channel closed: the broker redelivers what these acks would have settled.
      this.#closed = true;
    }
    if (entries.length - this.#head > this.#compactAt) {
      // A message held for long keeps the head in place: drop what is settled behind it.
      this.#entries = entries.slice(this.#head).filter((entry) => {
        if (entry.state !== 'done') return true;
        this.#byTag.delete(entry.message.fields.deliveryTag);
        return false;
      });
      this.#head = 0;
      this.#compactAt = Math.max(COMPACT_AFTER, 2 * this.#entries.length);
    } else if (this.#head > COMPACT_AFTER && this.#head * 2 > entries.length) {
      this.#entries = entries.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Stops writing: the channel is gone, and the broker requeues everything outstanding. */
  close(): void {
    this.#closed = true;
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('rabbitmq: channel closed');
  }
}
