/**
 * A producer's delayed send: `delayMs` or `deliverAt` checked against the
 * transport's `limits.maxDelayMs`, and turned into a due time on the
 * producer's monotonic clock, so that every attempt of one send is due at
 * the same moment.
 */
import { OptionError } from '../util/option-checks.js';
import type { Clock } from '../time/clock.js';
import type { OutgoingMessage, Transport } from '../transport/types.js';

/** The options of one send that delay it. */
export interface DelayOptions {
  readonly delayMs?: number;
  readonly deliverAt?: Date;
}

/**
 * The monotonic time a send is due at, or undefined for a send deliverable
 * at once (no delay, a delay of 0, a `deliverAt` not in the future). Throws
 * an {@link OptionError} naming the option when both are given, when
 * `delayMs` is not a finite number of at least 0 or `deliverAt` not a valid
 * Date, when the delay is longer than the transport holds, or when the
 * transport holds no delayed message at all.
 */
export function sendDueAt(options: DelayOptions, transport: Transport, clock: Clock): number | undefined {
  const { delayMs, deliverAt } = options;
  if (delayMs === undefined && deliverAt === undefined) return undefined;
  if (delayMs !== undefined && deliverAt !== undefined) throw new OptionError('send: give delayMs or deliverAt, not both');
  let name: string;
  let ms: number;
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0) {
      throw new OptionError(`send: delayMs must be a finite number of milliseconds of at least 0, got ${String(delayMs)}`);
    }
    name = 'delayMs';
    ms = delayMs;
  } else {
    if (!(deliverAt instanceof Date) || Number.isNaN(deliverAt.getTime())) throw new OptionError(`send: deliverAt must be a valid Date, got ${String(deliverAt)}`);
    name = 'deliverAt';
    ms = deliverAt.getTime() - clock.now();
  }
  if (ms <= 0) return undefined;
  const max = transport.limits?.maxDelayMs;
  if (max === undefined) throw new OptionError(`send: ${name} needs a transport that holds delayed messages; ${transport.name} declares no limits.maxDelayMs`);
  if (Math.ceil(ms) > max) {
    const asked = name === 'delayMs' ? `${ms} ms` : `${deliverAt!.toISOString()}, ${Math.ceil(ms)} ms from now`;
    throw new OptionError(`send: ${name} is beyond the longest delay ${transport.name} holds (${max} ms): ${asked}`);
  }
  return clock.monotonic() + ms;
}

/** `message` with the delay left, rounded up (none once it is due). */
export function withDelay(message: OutgoingMessage, leftMs: number): OutgoingMessage {
  return leftMs > 0 ? { ...message, delayMs: Math.ceil(leftMs) } : message;
}
