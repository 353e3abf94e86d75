/**
 * Reads a queue's stream in sequence order without side effects: each read
 * asks for the first message on the queue's subject at or after a sequence
 * (`{seq, next_by_subj}`), so nothing is delivered, held or counted, and a
 * gap left by a deleted message costs nothing. A read is a direct get
 * (`$JS.API.DIRECT.GET`, the message itself as the answer) on a stream that
 * allows them and has one replica, else a `$JS.API.STREAM.MSG.GET` (the
 * message inside a JSON answer, its body in base64).
 *
 * Reads go out a window at a time: request `i` of a window starting at `s`
 * asks for the first message at or after `s + i`. The answers are in order,
 * and together they hold every message from `s` up to the last one's
 * answer, so the next window starts after it. A dense stream gives a whole
 * window of messages per round trip; a sparse one, where answers repeat,
 * shrinks the window to twice what the last one found.
 */
import type { JetStreamManager, MsgRequest, NextMsgRequest, StoredMsg, StreamInfo } from '@nats-io/jetstream';
import { isNotFound } from './topology.js';

/** One read of a stream: the message a request names, or null when there is none. */
export type MessageReader = (stream: string, request: MsgRequest) => Promise<StoredMsg | null>;

/**
 * How to read the stream `info` describes: direct gets when it allows them
 * and has one replica (a replica that is not the leader could answer with a
 * message the leader already deleted), else `STREAM.MSG.GET`.
 */
export function readerFor(jsm: JetStreamManager, info: StreamInfo | undefined): MessageReader {
  if (info?.config.allow_direct === true && (info.config.num_replicas ?? 1) <= 1) {
    return async (stream, request) => {
      try {
        return await jsm.direct.getMessage(stream, request as Parameters<JetStreamManager['direct']['getMessage']>[1]);
      } catch (error) {
        // No one answers direct gets of a stream deleted since: it holds no message.
        if ((error as { isNoResponders?: () => boolean }).isNoResponders?.() === true) return null;
        throw error;
      }
    };
  }
  return (stream, request) => jsm.streams.getMessage(stream, request);
}

/** The most reads one window sends at once. */
export const READ_WINDOW = 64;

/** Where a read starts and ends, and how many messages it takes at most. */
export interface ReadRange {
  /** The first sequence to read from. */
  readonly from: number;
  /** The last sequence to read; messages after it are left. Default: no bound. */
  readonly to?: number;
  /** The most messages to read. */
  readonly limit: number;
}

/**
 * The messages of `subject` in `stream` within `range`, oldest first. A
 * missing stream reads as empty.
 */
export async function readStream(read: MessageReader, stream: string, subject: string, range: ReadRange): Promise<StoredMsg[]> {
  const out: StoredMsg[] = [];
  const to = range.to ?? Number.MAX_SAFE_INTEGER;
  let next = range.from;
  let window = READ_WINDOW;
  while (out.length < range.limit && next <= to) {
    const size = Math.min(window, range.limit - out.length, to - next + 1);
    let answers: (StoredMsg | null)[];
    try {
      answers = await Promise.all(Array.from({ length: size }, (_, i) => read(stream, nextOn(subject, next + i))));
    } catch (error) {
      if (isNotFound(error)) return out;
      throw error;
    }
    let found = 0;
    let last = next - 1;
    for (const message of answers) {
      if (message === null || message.seq <= last || message.seq > to) continue;
      out.push(message);
      last = message.seq;
      found++;
    }
    const tail = answers[size - 1];
    if (tail === null || tail === undefined) return out.slice(0, range.limit);
    next = tail.seq + 1;
    window = Math.max(1, Math.min(READ_WINDOW, 2 * found));
  }
  return out.slice(0, range.limit);
}

/**
 * The request for the first message on `subject` at or after `seq`. The
 * server answers it on `STREAM.MSG.GET` and on direct gets (2.9 and later);
 * the client types it for direct gets only.
 */
function nextOn(subject: string, seq: number): MsgRequest {
  const request: NextMsgRequest = { seq, next_by_subj: subject };
  return request as unknown as MsgRequest;
}
