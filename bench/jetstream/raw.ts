/**
 * The bare side of `npm run bench -- jetstream`: a `@nats-io/jetstream`
 * durable pull consumer read with `consume()`, each message acked
 * explicitly, nothing else.
 */
import type { NatsClients } from './server.js';
import { addPullConsumer, addWorkStream, publishAll } from './server.js';
import { countdown, messageName, within } from '../redis/workload.js';
import { messageBody, type Throughput } from './workload.js';

export interface RawSetup {
  /** The stream read by the raw consumer: made by each round, deleted by the caller after it. */
  readonly stream: string;
  readonly subject: string;
  /** The consumer's `max_ack_pending` and the messages each pull asks for. */
  readonly prefetch: number;
  /** The string every message carries, in the body {@link messageBody} makes. */
  readonly payload: string;
  /**
   * Whether each ack waits for the server's confirmation (`ackAck()`, the
   * acks of different messages still in flight side by side) instead of
   * `ack()`, which sends and returns.
   */
  readonly confirmAcks: boolean;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

const CONSUMER = 'raw';

/**
 * Loads `n` messages (ids `<round>-m-<i>`, unique per round so the
 * duplicate window drops none), then consumes them with a durable pull
 * consumer of `max_ack_pending` = prefetch, acking each. Timed from
 * `consume()` to the last ack flushed to (or confirmed by) the server.
 */
export async function rawThroughput(clients: NatsClients, setup: RawSetup, n: number, round: number): Promise<Throughput> {
  const { js, jsm, nc } = clients;
  await addWorkStream(jsm, setup.stream, setup.subject);
  await addPullConsumer(jsm, setup.stream, CONSUMER, setup.prefetch);
  await publishAll(clients, setup.stream, setup.subject, n, (i) => ({ id: messageName(`${round}-m`, i), body: messageBody(i, setup.payload) }));

  const consumer = await js.consumers.get(setup.stream, CONSUMER);
  const acked = countdown(n);
  const errors: unknown[] = [];
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const messages = await consumer.consume({ max_messages: setup.prefetch });
  const loop = (async () => {
    for await (const message of messages) {
      if (setup.confirmAcks) {
        void message.ackAck().then(
          () => acked.tick(),
          (error: unknown) => errors.push(error),
        );
      } else {
        message.ack();
        acked.tick();
      }
    }
  })();
  try {
    await within(acked.done, setup.timeoutMs, 'raw consumer');
    await nc.flush();
    const drainMs = performance.now() - t0;
    const cpuUsed = process.cpuUsage(cpu);
    if (errors.length > 0) throw new Error(`raw consumer: ${errors.length} acks failed; first: ${String(errors[0])}`);
    return {
      side: setup.confirmAcks ? 'raw, confirmed acks' : 'raw',
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
