/**
 * How precisely a design brings delayed retries back: messages are
 * published at a steady rate to a work stream whose consumer has no
 * `max_ack_pending` limit (so design (a)'s waiting retries never hold up
 * the others); each fails its first delivery and is retried once with its
 * delay. Lateness = the retry's handler start (after the design read the
 * retry state back) - (the first delivery's failure + delay).
 */
import { HEADER } from '../../../src/headers/names.js';
import { encodeNatsHeaders, decodeNatsHeaders } from '../../../src/transports/jetstream/codec.js';
import { countdown, messageIndex, messageName, paced, summariseLateness, within, type LatenessSummary } from '../../redis/workload.js';
import { addPullConsumer, addWorkStream, type NatsClients } from '../server.js';
import type { JsMsg } from '@nats-io/jetstream';
import { consumeEach, type Reading } from './consume.js';
import type { CaseNames, DelayDesign } from './design.js';
import { firstDelayedRetryHeaders } from './retry-headers.js';

const CONSUMER = 'work';
/** Messages per pull of the work consumer. */
const WORK_PREFETCH = 100;

export interface LatenessCase {
  /** The delays taken in turn: message i waits `delaysMs[i % length]`. */
  readonly delaysMs: readonly number[];
  /** Messages per delay. */
  readonly perDelay: number;
  /** Messages published per second. */
  readonly rate: number;
  readonly body: Uint8Array;
  /** The longest the run may take beyond the longest delay. */
  readonly timeoutMs: number;
}

/** Lateness by delay, in the order of {@link LatenessCase.delaysMs}. */
export type LatenessByDelay = { readonly delayMs: number; readonly lateness: LatenessSummary }[];

export async function measureLateness(clients: NatsClients, names: CaseNames, design: DelayDesign, setup: LatenessCase): Promise<LatenessByDelay> {
  const { js, jsm } = clients;
  await addWorkStream(jsm, names.workStream, names.workSubject);
  await addPullConsumer(jsm, names.workStream, CONSUMER, -1);
  await design.start();

  const total = setup.delaysMs.length * setup.perDelay;
  const delayOf = (i: number) => setup.delaysMs[i % setup.delaysMs.length]!;
  const failedAt = new Array<number>(total);
  const lateness = setup.delaysMs.map(() => [] as number[]);
  const handled = countdown(total);
  const handle = async (message: JsMsg) => {
    const { id } = decodeNatsHeaders(message.headers);
    if (id === undefined) throw new Error(`work message ${message.seq} has no id`);
    const i = messageIndex(id);
    const state = await design.retryState(message, id);
    const now = Date.now();
    if (state === undefined) {
      failedAt[i] = now;
      await design.retryLater(message, id, delayOf(i), firstDelayedRetryHeaders(delayOf(i), now));
      return;
    }
    if (state[HEADER.lastDelay] !== String(delayOf(i))) throw new Error(`retry of ${id} came back with the state ${JSON.stringify(state)}`);
    lateness[i % setup.delaysMs.length]!.push(now - (failedAt[i]! + delayOf(i)));
    message.ack();
    handled.tick();
  };
  let reading: Reading | undefined;
  try {
    reading = await consumeEach(js, names.workStream, CONSUMER, WORK_PREFETCH, handle);
    await paced(total, setup.rate, async (i) => {
      const id = messageName('d', i);
      await js.publish(names.workSubject, setup.body, { msgID: id, headers: encodeNatsHeaders(id, {}) });
    });
    await within(handled.done, setup.timeoutMs + Math.max(...setup.delaysMs), 'delayed retries');
  } finally {
    await reading?.stop();
    await design.stop();
  }
  return setup.delaysMs.map((delayMs, k) => ({ delayMs, lateness: summariseLateness(lateness[k]!) }));
}
