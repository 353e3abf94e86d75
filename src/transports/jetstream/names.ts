/**
 * Where each queue lives on the server. A queue, work or error, is one
 * stream with one subject; its delayed retries share the prefix's delay
 * stream, on a subject of their own. Queue names are encoded into subject
 * tokens and stream names, which allow fewer characters than a queue name.
 */

/** The durable pull consumer every queue is read through. */
export const QUEUE_CONSUMER = 'redeliver';

/** How a queue's stream says what it is, in its description. */
export const QUEUE_DESCRIPTION = { work: 'redeliver queue', error: 'redeliver error queue' } as const;

/** What a queue's stream is: a work queue or an error queue. */
export type JetStreamQueueKind = keyof typeof QUEUE_DESCRIPTION;

/** The names of one queue's stream, subject and consumers. */
export interface QueueNames {
  readonly queue: string;
  /** The stream holding the queue's messages: `<prefix>_Q_<token>`. */
  readonly stream: string;
  /** The subject messages are published on: `<prefix>.q.<token>`. */
  readonly subject: string;
  /** The subject of its delayed retries, in the delay stream: `<prefix>.d.<token>`. */
  readonly delaySubject: string;
  /** The durable consumer reading its delayed retries: `d_<token>`. */
  readonly delayConsumer: string;
}

const SAFE = /^[A-Za-z0-9_-]$/;

/** A queue name as a subject token and stream-name part: `[A-Za-z0-9_-]` kept, every other UTF-8 byte `~XX`. */
export function encodeQueueName(queue: string): string {
  let out = '';
  for (const char of queue) {
    if (SAFE.test(char)) out += char;
    else for (const byte of Buffer.from(char, 'utf8')) out += `~${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The queue name a token encodes, or undefined when it is not a token {@link encodeQueueName} makes. */
export function decodeQueueName(token: string): string | undefined {
  if (!/^(?:[A-Za-z0-9_-]|~[0-9A-F]{2})+$/.test(token)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < token.length; ) {
    if (token[i] === '~') {
      bytes.push(Number.parseInt(token.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(token.charCodeAt(i));
      i += 1;
    }
  }
  const queue = Buffer.from(bytes).toString('utf8');
  return encodeQueueName(queue) === token ? queue : undefined;
}

/** The longest stream name the server accepts is 255 bytes; queue names are checked against it. */
const MAX_STREAM_NAME = 255;

/** The names of every stream, subject and consumer under one prefix. */
export class JetStreamNames {
  /** The stream holding every queue's delayed retries: `<prefix>_DELAYS`. */
  readonly delayStream: string;
  /** The subjects of the delay stream: `<prefix>.d.>`. */
  readonly delaySubjects: string;
  /** A small stream whose stored timestamps tell the server's clock: `<prefix>_CLOCK`. */
  readonly clockStream: string;
  /** The subject of {@link clockStream}. */
  readonly clockSubject: string;
  /** The subject prefix of every queue: `<prefix>.q.`. */
  readonly queueSubjectPrefix: string;
  readonly #cache = new Map<string, QueueNames>();

  /** Throws a RangeError unless `prefix` is made of letters, digits and `-`. */
  constructor(readonly prefix: string) {
    if (typeof prefix !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(prefix)) {
      throw new RangeError(`JetStreamTransport: prefix must be 1 to 64 letters, digits or '-', got ${JSON.stringify(prefix)}`);
    }
    this.delayStream = `${prefix}_DELAYS`;
    this.delaySubjects = `${prefix}.d.>`;
    this.clockStream = `${prefix}_CLOCK`;
    this.clockSubject = `${prefix}.clock`;
    this.queueSubjectPrefix = `${prefix}.q.`;
  }

  /** The names of `queue`; throws a RangeError when its stream name would be too long. */
  of(queue: string): QueueNames {
    let names = this.#cache.get(queue);
    if (names === undefined) {
      const token = encodeQueueName(queue);
      const stream = `${this.prefix}_Q_${token}`;
      if (stream.length > MAX_STREAM_NAME) throw new RangeError(`jetstream: queue name ${JSON.stringify(queue.slice(0, 40))}… is too long: its stream name would exceed ${MAX_STREAM_NAME} characters`);
      names = { queue, stream, subject: `${this.queueSubjectPrefix}${token}`, delaySubject: `${this.prefix}.d.${token}`, delayConsumer: `d_${token}` };
      this.#cache.set(queue, names);
    }
    return names;
  }

  /** Whether `stream` is named as one of this prefix's streams (`<prefix>_…`); prefixes hold no `_`, so no other prefix's are. */
  ownsStream(stream: string): boolean {
    return stream.startsWith(`${this.prefix}_`);
  }

  /** The queue a stream's subject belongs to, or undefined when the subject is not one of this prefix's queues. */
  queueOfSubject(subject: string): string | undefined {
    if (!subject.startsWith(this.queueSubjectPrefix)) return undefined;
    return decodeQueueName(subject.slice(this.queueSubjectPrefix.length));
  }
}
