/**
 * One pass over a queue, linear in its size: the messages it held when the
 * pass began (`message_count` of a passive declaration), each taken once
 * with `basic.get` and held unacknowledged on the pass's channel until it is
 * acked or the pass gives everything else back at its end. Messages that
 * arrive during the pass are not read; messages another reader holds are
 * not seen, and are counted as {@link SnapshotPass.unseen}.
 */
import type { GetMessage } from 'amqplib';
import type { Clock } from '../../time/clock.js';
import type { Session } from './connection.js';
import { QueueReader, ScanLimitError, type PassiveChannel, type ReadStats } from './queue-access.js';

/** How a pass reads. */
export interface SnapshotPassOptions {
  readonly clock: Clock;
  /** Longest wait for one broker reply. */
  readonly timeoutMs: number;
  /** The most messages one pass may hold; a queue that holds more is refused before anything is read. */
  readonly maxScan: number;
  /** What is being done, for errors. */
  readonly operation: string;
  readonly stats?: ReadStats;
}

export class SnapshotPass {
  #read = 0;
  #endedEarly = false;
  #snapshot: number;

  private constructor(
    readonly reader: QueueReader,
    snapshot: number,
  ) {
    this.#snapshot = snapshot;
  }

  /**
   * Messages the queue held, ready, when the pass began: the depth a
   * passive declaration reported, or the depth the first `basic.get` found
   * when that is larger. Messages another reader just gave back reach the
   * queue's count a moment after that reader's channel closed, and the
   * later of the two readings misses fewer of them.
   */
  get snapshot(): number {
    return this.#snapshot;
  }

  /**
   * Reads the queue's depth on `passive`, then opens the pass on a channel
   * of its own. Throws a {@link ScanLimitError} when the queue holds more
   * than `maxScan` messages. A queue that does not exist is empty.
   */
  static async open(session: Session, passive: PassiveChannel, queue: string, options: SnapshotPassOptions): Promise<SnapshotPass> {
    const snapshot = (await passive.queue(queue))?.messageCount ?? 0;
    if (snapshot > options.maxScan) throw new ScanLimitError(queue, options.maxScan, options.operation);
    return new SnapshotPass(await QueueReader.open(session, queue, options), snapshot);
  }

  /** Messages read so far. */
  get read(): number {
    return this.#read;
  }

  /**
   * Messages of the snapshot the pass never read because the queue ran
   * empty first: another reader held them (or took them for good).
   */
  get unseen(): number {
    return this.#endedEarly ? this.#snapshot - this.#read : 0;
  }

  /** The next message of the snapshot, held; undefined once the snapshot is read or the queue is empty. */
  async next(): Promise<GetMessage | undefined> {
    if (this.#endedEarly || this.#read >= this.#snapshot) return undefined;
    const message = await this.reader.next();
    if (!message) {
      this.#endedEarly = true;
      return undefined;
    }
    if (this.#read === 0) this.#snapshot = Math.max(this.#snapshot, message.fields.messageCount + 1);
    this.#read++;
    return message;
  }

  /** Removes `message` (see {@link QueueReader.ack}). */
  ack(message: GetMessage): void {
    this.reader.ack(message);
  }

  /** Gives back every message not acked and ends the pass; resolves whether the broker confirmed it (see {@link QueueReader.finish}). */
  finish(): Promise<boolean> {
    return this.reader.finish();
  }
}
