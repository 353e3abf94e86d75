/**
 * The broker topology: work queues, and the delay levels that hold delayed
 * retries.
 *
 * A delay of `d` milliseconds is written in binary with {@link DELAY_LEVELS}
 * bits. Level `n` is a queue whose every message waits exactly `2^n` ms
 * (`x-message-ttl`), so within one level the oldest message always expires
 * first and a short delay is never stuck behind a long one. The routing key
 * carries the bits, most significant first; each level's exchange sends the
 * message into its queue when its bit is 1 and straight on to the next lower
 * exchange when it is 0. An expiring message is dead-lettered to the next
 * lower exchange with its routing key unchanged, and after level 0 it reaches
 * a headers exchange that routes it back to its work queue by the
 * destination header. The level queues are shared by every endpoint with the
 * same prefix: there are at most {@link DELAY_LEVELS} of them, whatever the
 * mix of delays. See docs/rabbitmq.md for the diagram.
 *
 * Two kinds of levels exist, under different names since a queue's type
 * cannot change: quorum levels, whose hops are dead-lettered at least once
 * (a copy leaves a level only once the next queue has confirmed it), and
 * classic levels, dead-lettered at most once and without confirms, so a
 * broker crash can lose the copies in transit.
 */
import type { Channel } from 'amqplib';
import { checkDelay } from '../../transport/delay.js';
import { INTERNAL_HEADERS } from './wire-headers.js';

/** Number of delay levels: level `n` holds a message for `2^n` ms, levels 0 to 27. */
export const DELAY_LEVELS = 28;

/** The longest delay the levels can hold: `2^28 - 1` ms, about 74.6 hours. */
export const MAX_DELAY_MS = 2 ** DELAY_LEVELS - 1;

/** The kinds of delay levels: quorum queues with at-least-once hops, or classic queues with at-most-once hops. */
export type DelayLevelType = 'quorum' | 'classic';

/** The names of the shared delay topology for one prefix and kind of levels. */
export interface DelayTopologyNames {
  /** The kind of levels these names are for. */
  readonly type: DelayLevelType;
  /** Exchange and queue of level `n` (they share the name). */
  level(n: number): string;
  /** The headers exchange that returns a message to its work queue. */
  readonly deliver: string;
  /**
   * Quorum levels only: the fanout exchange and quorum queue (same name)
   * that keep a copy whose work queue no longer exists, the deliver
   * exchange's alternate exchange. Undefined for classic levels, which drop
   * such a copy.
   */
  readonly unroutable: string | undefined;
}

/**
 * Names for `prefix`. Quorum levels: `<prefix>.delay-quorum.00` to `.27`,
 * `<prefix>.delay-quorum.deliver` and `<prefix>.delay-quorum.unroutable`.
 * Classic levels: `<prefix>.delay.00` to `.27` and `<prefix>.delay.deliver`.
 */
export function delayTopologyNames(prefix: string, type: DelayLevelType): DelayTopologyNames {
  const base = type === 'quorum' ? `${prefix}.delay-quorum` : `${prefix}.delay`;
  return {
    type,
    level: (n) => `${base}.${String(n).padStart(2, '0')}`,
    deliver: `${base}.deliver`,
    unroutable: type === 'quorum' ? `${base}.unroutable` : undefined,
  };
}

/**
 * Whole milliseconds the levels will hold for a requested delay: rounded up,
 * so a message is never early. Throws a RangeError for a delay the levels
 * cannot hold.
 */
export function delayToLevelsMs(delayMs: number, what = 'rabbitmq: delay'): number {
  return checkDelay(what, delayMs, MAX_DELAY_MS);
}

/** The routing key for a delay: its 28 bits as dot-separated words, most significant first. */
export function delayRoutingKey(delayMs: number): string {
  const bits = delayToLevelsMs(delayMs).toString(2).padStart(DELAY_LEVELS, '0');
  return bits.split('').join('.');
}

/** The levels a message with this delay waits in, highest first. */
export function delayLevels(delayMs: number): number[] {
  const ms = delayToLevelsMs(delayMs);
  const levels: number[] = [];
  for (let n = DELAY_LEVELS - 1; n >= 0; n--) if (Math.floor(ms / 2 ** n) % 2 === 1) levels.push(n);
  return levels;
}

/**
 * Where to publish a delayed message: the exchange of its highest level (the
 * levels above would only pass it on), or the deliver exchange for no delay.
 */
export function delayEntryExchange(names: DelayTopologyNames, delayMs: number): string {
  const top = delayLevels(delayMs)[0];
  return top === undefined ? names.deliver : names.level(top);
}

/**
 * The arguments of level `n`'s queue. Every endpoint declares the same, so
 * they agree. A quorum level dead-letters with `x-dead-letter-strategy:
 * at-least-once`, which RabbitMQ only honours with `x-overflow:
 * reject-publish` (the levels have no length limit, so nothing is refused).
 */
export function levelQueueArguments(names: DelayTopologyNames, n: number): Record<string, unknown> {
  const args: Record<string, unknown> = {
    'x-message-ttl': 2 ** n,
    'x-dead-letter-exchange': n === 0 ? names.deliver : names.level(n - 1),
  };
  if (names.type === 'quorum') {
    args['x-queue-type'] = 'quorum';
    args['x-dead-letter-strategy'] = 'at-least-once';
    args['x-overflow'] = 'reject-publish';
  }
  return args;
}

/** The queue names of every level, level 0 first. */
export function levelQueues(names: DelayTopologyNames): string[] {
  return Array.from({ length: DELAY_LEVELS }, (_, n) => names.level(n));
}

/** The topic pattern that matches routing keys whose level-`n` bit is `bit`. */
export function levelBindingPattern(n: number, bit: 0 | 1): string {
  return `${'*.'.repeat(DELAY_LEVELS - 1 - n)}${bit}.#`;
}

/**
 * Declares the delay levels and the deliver exchange (for quorum levels, with
 * the unroutable exchange and queue as its alternate exchange). Every
 * declaration is idempotent: declaring again with the same prefix changes
 * nothing.
 */
export async function declareDelayTopology(channel: Channel, names: DelayTopologyNames): Promise<void> {
  if (names.unroutable !== undefined) {
    // An at-least-once hop that routes nowhere is kept and retried every few minutes, holding one of
    // the level's few in-flight slots: without this queue, copies for a deleted work queue would stall
    // the level for every other queue.
    await channel.assertExchange(names.unroutable, 'fanout', { durable: true });
    await channel.assertQueue(names.unroutable, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await channel.bindQueue(names.unroutable, names.unroutable, '');
    await channel.assertExchange(names.deliver, 'headers', { durable: true, alternateExchange: names.unroutable });
  } else {
    await channel.assertExchange(names.deliver, 'headers', { durable: true });
  }
  for (let n = 0; n < DELAY_LEVELS; n++) {
    const name = names.level(n);
    await channel.assertExchange(name, 'topic', { durable: true });
    await channel.assertQueue(name, { durable: true, arguments: levelQueueArguments(names, n) });
    await channel.bindQueue(name, name, levelBindingPattern(n, 1));
    await channel.bindExchange(n === 0 ? names.deliver : names.level(n - 1), name, levelBindingPattern(n, 0));
  }
}

/** The queue types a work queue can have. */
export type QueueType = 'classic' | 'quorum';

/** What a declared queue is for: work queues may be bounded (`maxLength`), error queues never are. */
export type QueueRole = 'work' | 'error';

/**
 * The arguments of a work or error queue. Endpoints sharing a queue must pass
 * the same options. `maxLength` (work queues only) adds `x-max-length` with
 * `x-overflow: reject-publish`, so a full queue refuses publishes with a nack
 * rather than dropping its oldest messages.
 */
export function workQueueArguments(queueType: QueueType, deliveryLimit: number | undefined, maxLength?: number): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  if (queueType === 'quorum') {
    args['x-queue-type'] = 'quorum';
    if (deliveryLimit !== undefined) args['x-delivery-limit'] = deliveryLimit;
  }
  if (maxLength !== undefined) {
    args['x-max-length'] = maxLength;
    args['x-overflow'] = 'reject-publish';
  }
  return args;
}

/** The binding that routes a message leaving the delay levels back to `queue`. */
export function deliverBindingArguments(queue: string): Record<string, string> {
  return { 'x-match': 'all', [INTERNAL_HEADERS.destination]: queue };
}

/**
 * Reads the broker's reply to an inequivalent queue declaration, such as
 * `inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received
 * none but current is the value '3' of type 'byte'`: the argument, and its
 * current value (undefined when the queue has none).
 */
export function parseInequivalentArgument(message: string): { argument: string; current: string | undefined } | undefined {
  const match = /inequivalent arg '([^']+)'.*?but current is (none|the value '([^']*)'|'([^']*)')/.exec(message);
  if (!match) return undefined;
  return { argument: match[1]!, current: match[3] ?? match[4] };
}
