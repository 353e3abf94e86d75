/**
 * FIFO messages (sent with a message group) and redeliver's retries, on the
 * real broker. A retry's copy keeps the group: an immediate one is sent in
 * it, a delayed one travels as a timed message (the broker takes no group
 * on those) carrying the group in `redeliver-message-group`, and re-enters
 * the group when due. What the broker does with the group's later messages
 * while the first one is held, then waits for its retry, depends on the
 * consumer group: measured here for the default group and a FIFO group
 * (`consumeMessageOrderly`), with the later messages sent while the first
 * is held, and with all three stored before anything receives.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Producer as RocketProducer } from 'rocketmq-client-nodejs';
import { encodeProperties } from '../../../src/transports/rocketmq/index.js';
import { request, REQUEST } from '../../../src/transports/rocketmq/remoting.js';
import type { Delivery } from '../../../src/transport/types.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratches: RocketScratch[] = [];
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

afterAll(async () => {
  if (!skip) for (const s of scratches) await s.cleanup();
}, 120_000);

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** How long the first message is held before its retry is asked for. */
const HOLD_MS = 3_000;
/** The delay of that retry. */
const RETRY_MS = 2_000;

interface Seen {
  readonly id: string;
  readonly n: string | undefined;
  readonly group: string | undefined;
}

/**
 * Sends a-1, a-2, a-3 in message group `g-a` with the client's own producer
 * and consumes them: a-1 is held for {@link HOLD_MS}, then retried in
 * `retryMs` ({@link RETRY_MS} unless given); the rest are acknowledged.
 * With `laterWhileHeld`, a-2 and a-3 are sent only once a-1 is handed out;
 * else all three are stored before anything receives (one receive may take
 * them together). Resolves the deliveries in the order they were handed
 * out, and the ids handed out while a-1 was held.
 */
async function run(label: string, options: { orderly: boolean; prefetch: number; laterWhileHeld: boolean; retryMs?: number }) {
  const scratch = new RocketScratch(label);
  scratches.push(scratch);
  if (options.orderly) {
    for (const broker of await scratch.admin.masters()) {
      const body = Buffer.from(JSON.stringify({ groupName: scratch.group, consumeEnable: true, consumeMessageOrderly: true, consumeBroadcastEnable: false, retryQueueNums: 1, retryMaxTimes: 16, brokerId: 0, whichBrokerWhenConsumeSlowly: 1, notifyConsumerIdsChangedEnable: true }));
      expect((await request(broker, REQUEST.updateAndCreateSubscriptionGroup, {}, 5_000, body)).code).toBe(0);
    }
  }
  const topic = `redeliver-fifo-${scratch.group.slice(-8)}`;
  const t = scratch.transport();
  await t.admin.ensure(topic, 'work');
  const producer = new RocketProducer({ endpoints: ROCKETMQ_ENDPOINTS, namespace: '', logger: quiet as never, maxAttempts: 1 });
  await producer.startup();
  const send = (id: string) => producer.send({ topic, body: Buffer.from(id), messageGroup: 'g-a', keys: [id], properties: encodeProperties(id, { n: '0' }) });
  const seen: Seen[] = [];
  const duringHold: string[] = [];
  let holding = false;
  let first: Delivery | undefined;
  for (const id of options.laterWhileHeld ? ['a-1'] : ['a-1', 'a-2', 'a-3']) await send(id);
  const sub = await t.consume(
    topic,
    (d: Delivery & { messageGroup?: string }) => {
      seen.push({ id: d.id, n: d.headers['n'], group: d.messageGroup });
      if (holding) duringHold.push(d.id);
      if (d.id === 'a-1' && d.headers['n'] === '0') {
        holding = true;
        first = d;
      } else void d.ack();
    },
    { prefetch: options.prefetch },
  );
  try {
    await until('a-1', () => first !== undefined, 20_000);
    if (options.laterWhileHeld) for (const id of ['a-2', 'a-3']) await send(id);
    await new Promise((r) => setTimeout(r, HOLD_MS));
    holding = false;
    await first!.retryLater(options.retryMs ?? RETRY_MS, { n: '1' });
    await until('the rest, and a-1 again', () => seen.length === 4, 40_000);
    // Time for anything more to arrive (a hop handed out would show here).
    await new Promise((r) => setTimeout(r, 1_000));
    console.info(`rocketmq fifo, ${options.orderly ? 'FIFO' : 'default'} consumer group, prefetch ${options.prefetch}, ${options.laterWhileHeld ? 'a-2 and a-3 sent while a-1 was held' : 'all sent first'}, retry in ${options.retryMs ?? RETRY_MS} ms: handed out ${seen.map((s) => `${s.id}#${s.n}`).join(', ')}; while a-1 was held: ${duringHold.join(', ') || 'nothing'}`);
    return { seen, duringHold };
  } finally {
    await sub.close();
    await t.close();
    await producer.shutdown();
  }
}

describe.skipIf(Boolean(skip))('rocketmq: FIFO messages retried', () => {
  it("default consumer group: the group's later messages are handed out while one is held; its delayed copy comes back in the group, last", async () => {
    const { seen, duringHold } = await run('fifo-default', { orderly: false, prefetch: 4, laterWhileHeld: true });
    expect(seen.map((s) => `${s.id}#${s.n}`)).toEqual(['a-1#0', 'a-2#0', 'a-3#0', 'a-1#1']);
    expect(seen.every((s) => s.group === 'g-a')).toBe(true);
    expect(duringHold).toEqual(['a-2', 'a-3']);
  }, 60_000);

  it('an immediate retry of a FIFO message is sent in its group', async () => {
    const { seen } = await run('fifo-now', { orderly: false, prefetch: 4, laterWhileHeld: false, retryMs: 0 });
    expect(seen.at(-1)).toEqual({ id: 'a-1', n: '1', group: 'g-a' });
  }, 60_000);

  it("FIFO consumer group: the broker holds the group's later messages back while one is held, gives them once its retry is scheduled; the retry comes last, in the group", async () => {
    const { seen, duringHold } = await run('fifo-ordered', { orderly: true, prefetch: 4, laterWhileHeld: true });
    expect(duringHold).toEqual([]);
    expect(seen.map((s) => `${s.id}#${s.n}`)).toEqual(['a-1#0', 'a-2#0', 'a-3#0', 'a-1#1']);
    expect(seen.every((s) => s.group === 'g-a')).toBe(true);
  }, 60_000);

  it("FIFO consumer group, the group's messages received in one batch: all of the batch are handed out at once", async () => {
    const { seen, duringHold } = await run('fifo-batch', { orderly: true, prefetch: 4, laterWhileHeld: false });
    expect(duringHold).toEqual(['a-2', 'a-3']);
    expect(seen.map((s) => `${s.id}#${s.n}`)).toEqual(['a-1#0', 'a-2#0', 'a-3#0', 'a-1#1']);
  }, 60_000);
});
