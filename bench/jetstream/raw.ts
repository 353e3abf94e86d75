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
  /** How each message is acked: see {@link RawAcks}. */
  readonly acks: RawAcks;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

const CONSUMER = 'raw';

/**
 * - `sent`: `ack()`, which sends the ack and returns;
 * - `confirmed`: `ackAck()`, each ack confirmed by the server's reply (the
 *   acks of different messages in flight side by side);
 * - `flushed`: `ack()`, and one `flush()` (a PING answered once the server
 *   has read everything sent before it) for the acks of each event-loop turn.
 */
export type RawAcks = 'sent' | 'confirmed' | 'flushed';

const SIDE: Record<RawAcks, Throughput['side']> = { sent: 'raw', confirmed: 'raw, confirmed acks', flushed: 'raw, a flush per turn' };

/**
 * Loads `n` messages (ids `<round>-m-<i>`, unique per round so the
 * duplicate window drops none), then consumes them with a durable pull
 * consumer of `max_ack_pending` = prefetch, acking each. Timed from
 * `consume()` to the last ack flushed to (or confirmed by) the server.
 * An ack or flush that fails fails the round, and so does a message left
 * in the stream 5 s after the last ack.
 */
export async function rawThroughput(clients: NatsClients, setup: RawSetup, n: number, round: number): Promise<Throughput> {
  const { js, jsm, nc } = clients;
  await addWorkStream(jsm, setup.stream, setup.subject);
  await addPullConsumer(jsm, setup.stream, CONSUMER, setup.prefetch);
  await publishAll(clients, setup.stream, setup.subject, n, (i) => ({ id: messageName(`${round}-m`, i), body: messageBody(i, setup.payload) }));

  const consumer = await js.consumers.get(setup.stream, CONSUMER);
  const acked = countdown(n);
  let fail!: (error: unknown) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const messages = await consumer.consume({ max_messages: setup.prefetch });
  let unflushed = 0;
  const flush = () => {
    const count = unflushed;
    unflushed = 0;
    nc.flush().then(
      () => {
        for (let i = 0; i < count; i++) acked.tick();
      },
      fail,
    );
  };
  const loop = (async () => {
    for await (const message of messages) {
      if (setup.acks === 'confirmed') {
        void message.ackAck().then(() => acked.tick(), fail);
      } else if (setup.acks === 'flushed') {
        message.ack();
        if (unflushed++ === 0) setImmediate(flush);
      } else {
        message.ack();
        acked.tick();
      }
    }
  })();
  try {
    await within(Promise.race([acked.done, failed]), setup.timeoutMs, 'raw consumer');
    await nc.flush();
    const drainMs = performance.now() - t0;
    const cpuUsed = process.cpuUsage(cpu);
    return {
      side: SIDE[setup.acks],
      messages: n,
      drainMs: Math.round(drainMs),
      perSec: Math.round((n * 1000) / drainMs),
      cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000),
    };
  } finally {
    await messages.close();
    await loop;
    await emptied(jsm, setup.stream);
  }
}

/** The server applies acks after it has read them: waits up to 5 s for the work-queue stream to have removed every acked message. */
async function emptied(jsm: NatsClients['jsm'], stream: string): Promise<void> {
  const until = performance.now() + 5_000;
  for (;;) {
    const { state } = await jsm.streams.info(stream);
    if (state.messages === 0) return;
    if (performance.now() > until) throw new Error(`raw consumer: ${state.messages} messages left in ${stream}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
