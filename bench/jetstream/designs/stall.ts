/**
 * What long delays do to a consumer with a small `max_ack_pending`: the
 * work stream holds `stalled` messages that fail and wait out `delayMs`,
 * followed by a backlog of fresh messages that succeed. The consumer's
 * `max_ack_pending` and its pulls are `prefetch`. Counted: the fresh
 * messages handled in the `delayMs` after the last stalled one was
 * settled as a delayed retry.
 */
import { decodeNatsHeaders, encodeNatsHeaders } from '../../../src/transports/jetstream/codec.js';
import { within } from '../../redis/workload.js';
import { addPullConsumer, addWorkStream, publishAll, type NatsClients } from '../server.js';
import type { JsMsg } from '@nats-io/jetstream';
import { consumeEach, type Reading } from './consume.js';
import type { CaseNames, DelayDesign } from './design.js';
import { firstDelayedRetryHeaders } from './retry-headers.js';

const CONSUMER = 'work';

export interface StallCase {
  readonly stalled: number;
  readonly delayMs: number;
  /** Fresh messages waiting behind the stalled ones: more than the consumer can take in `delayMs`. */
  readonly fresh: number;
  readonly prefetch: number;
  readonly body: Uint8Array;
}

export interface StallResult {
  /** Fresh messages handled within the window. */
  readonly freshInWindow: number;
  /** Fresh messages per second within the window (over the time they took, when the backlog ran out first). */
  readonly freshPerSec: number;
  /** Whether every fresh message was handled before the window ended (the rate is then a lower bound). */
  readonly exhausted: boolean;
  /** From the window's start to the first fresh message handled in it, ms; undefined when none was. */
  readonly firstFreshMs: number | undefined;
}

export async function measureStall(clients: NatsClients, names: CaseNames, design: DelayDesign, setup: StallCase): Promise<StallResult> {
  const { js, jsm } = clients;
  await addWorkStream(jsm, names.workStream, names.workSubject);
  await addPullConsumer(jsm, names.workStream, CONSUMER, setup.prefetch);
  await design.start();
  const message = (prefix: string) => (i: number) => {
    const id = `${prefix}-${i}`;
    return { id, body: setup.body, headers: encodeNatsHeaders(id, {}) };
  };
  await publishAll(clients, names.workStream, names.workSubject, setup.stalled, message('s'));
  await publishAll(clients, names.workStream, names.workSubject, setup.fresh, message('f'), setup.stalled + setup.fresh);

  let settled = 0;
  let windowStart: number | undefined;
  let windowStarted!: () => void;
  const started = new Promise<void>((resolve) => (windowStarted = resolve));
  const fresh: number[] = [];
  const handle = async (delivery: JsMsg) => {
    const { id } = decodeNatsHeaders(delivery.headers);
    if (id === undefined) throw new Error(`work message ${delivery.seq} has no id`);
    if (id.startsWith('f-')) {
      delivery.ack();
      fresh.push(performance.now());
      return;
    }
    if ((await design.retryState(delivery, id)) !== undefined) {
      delivery.ack();
      return;
    }
    await design.retryLater(delivery, id, setup.delayMs, firstDelayedRetryHeaders(setup.delayMs, Date.now()));
    if (++settled === setup.stalled) {
      windowStart = performance.now();
      windowStarted();
    }
  };
  let reading: Reading | undefined;
  try {
    reading = await consumeEach(js, names.workStream, CONSUMER, setup.prefetch, handle);
    await within(started, 60_000, `${setup.stalled} stalled messages settled`);
    await new Promise((resolve) => setTimeout(resolve, setup.delayMs));
  } finally {
    await reading?.stop();
    await design.stop();
  }
  const start = windowStart!;
  const end = start + setup.delayMs;
  const inWindow = fresh.filter((t) => t >= start && t < end);
  const exhausted = fresh.length === setup.fresh && fresh[fresh.length - 1]! < end;
  const spanMs = exhausted && inWindow.length > 0 ? Math.max(1, inWindow[inWindow.length - 1]! - start) : setup.delayMs;
  return {
    freshInWindow: inWindow.length,
    freshPerSec: Math.round((inWindow.length * 1000) / spanMs),
    exhausted,
    firstFreshMs: inWindow.length === 0 ? undefined : Math.round(inWindow[0]! - start),
  };
}
