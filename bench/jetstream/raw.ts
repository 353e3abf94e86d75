/**
 * The bare side of `npm run bench -- jetstream`: a `@nats-io/jetstream`
 * durable pull consumer read with `consume()`, each message acked
 * explicitly, nothing else.
 */
import type { NatsClients } from './server.js';
import { addPullConsumer, addWorkStream, publishAll } from './server.js';
import { countdown, within } from '../redis/workload.js';

/** One throughput round of either side. */
export interface Throughput {
  readonly side: 'raw' | 'redeliver';
  readonly messages: number;
  /** From the consumer's start to the last message acked, in milliseconds. */
  readonly drainMs: number;
  readonly perSec: number;
  /** User + system CPU time of the bench process during the drain (the server's own CPU is not in it). */
  readonly cpuMs: number;
}

export interface RawSetup {
  /** The stream read by the raw consumer; made on first use, deleted with the prefix's streams. */
  readonly stream: string;
  readonly subject: string;
  /** The consumer's `max_ack_pending` and the messages each pull asks for. */
  readonly prefetch: number;
  readonly body: Uint8Array;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

const CONSUMER = 'raw';

/**
 * Loads `n` messages (ids `<round>-m-<i>`, unique per round so the
 * duplicate window drops none), then consumes them with a durable pull
 * consumer of `max_ack_pending` = prefetch, acking each. Timed from
 * `consume()` to the last ack flushed to the server.
 */
export async function rawThroughput(clients: NatsClients, setup: RawSetup, n: number, round: number): Promise<Throughput> {
  const { js, jsm, nc } = clients;
  const exists = await jsm.streams.info(setup.stream).then(
    () => true,
    () => false,
  );
  if (!exists) {
    await addWorkStream(jsm, setup.stream, setup.subject);
    await addPullConsumer(jsm, setup.stream, CONSUMER, setup.prefetch);
  }
  await publishAll(clients, setup.stream, setup.subject, n, (i) => ({ id: `${round}-m-${i}`, body: setup.body }));

  const consumer = await js.consumers.get(setup.stream, CONSUMER);
  const acked = countdown(n);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const messages = await consumer.consume({ max_messages: setup.prefetch });
  const loop = (async () => {
    for await (const message of messages) {
      message.ack();
      acked.tick();
    }
  })();
  try {
    await within(acked.done, setup.timeoutMs, 'raw consumer');
    await nc.flush();
    const drainMs = performance.now() - t0;
    const cpuUsed = process.cpuUsage(cpu);
    return {
      side: 'raw',
      messages: n,
      drainMs: Math.round(drainMs),
      perSec: Math.round((n * 1000) / drainMs),
      cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000),
    };
  } finally {
    await messages.close();
    await loop;
    const { state } = await jsm.streams.info(setup.stream);
    if (state.messages !== 0) throw new Error(`raw consumer: ${state.messages} messages left in ${setup.stream}`);
  }
}
