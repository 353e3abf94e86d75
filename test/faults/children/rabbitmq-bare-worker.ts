/**
 * The bare amqplib client beside redeliver in a fault scenario: a consumer
 * of the bare quorum work queue (prefetch `concurrency`) whose handler
 * fails the attempts the same failure mix says, and retries the way a plain
 * RabbitMQ consumer does: `basic.nack` with requeue for an immediate retry;
 * for a delayed retry, a copy published (confirmed) to the delay queue with
 * a per-message `expiration`, which dead-letters it back to the work queue,
 * then `basic.ack`; after the last round, a copy published (confirmed) to
 * the error queue, then `basic.ack`. Same retry budget as the redeliver
 * worker (rounds of 3 attempts; 2 delayed retries of `delayStepMs`, then
 * twice that), counted from the quorum queue's `x-delivery-count` (returns
 * of the message so far: this delivery is that plus 1); a delayed retry's
 * copy starts a count of its own, so it carries its round in a header.
 * The body is the message id.
 *
 * The id of every successful handling is appended to an fsync'd log before
 * the ack; every handler run is recorded in the holds log before its
 * settlement goes out, as the redeliver worker records it: `<id> <round>
 * <delivery count> <start> <end> <channel lost>`, the last the moment the
 * run first saw its connection or channel closed (looked at every 5 ms
 * while it works, and as it ends; `-` when it never did): a RabbitMQ
 * consumer's only sign that the broker took its deliveries back. A closed
 * connection or channel, or a consumer the broker cancelled, is replaced by
 * a new connection 500 ms later, which declares the bare scope's queues
 * again before it consumes. SIGTERM stops it gracefully.
 *
 * Usage: node --import tsx rabbitmq-bare-worker.ts '<WorkerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { openEvidenceLog } from '../evidence-log.js';
import { attemptFails, behaviourOf } from '../failure-mix.js';
import { bareConnect, bareDelayQueue, declareBareQueues, publishConfirmed, ROUND_HEADER } from './rabbitmq-bare-client.js';
import type { WorkerConfig } from './worker.js';

/** Attempts per round: the first and 2 immediate retries. */
const ROUND = 3;
/** Delayed retries before the error queue. */
const DELAYED_RETRIES = 2;
/** How often a handler run looks at its channel while it works. */
const CHANNEL_CHECK_MS = 5;
/** Wait before connecting again after a loss or a failed attempt. */
const RECONNECT_MS = 500;

const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig;
if (config.transport.kind !== 'rabbitmq') throw new Error('rabbitmq-bare-worker: a rabbitmq transport spec is needed');
const { url, connectionName } = config.transport;
const log = openEvidenceLog(config.log);
const holds = config.holdsLog === undefined ? undefined : openEvidenceLog(config.holdsLog);
const delayQueue = bareDelayQueue(config.queue);

/** One connection, its consuming channel and its publishing (confirm) channel. */
interface Session {
  readonly model: ChannelModel;
  readonly consume: Channel;
  readonly publish: ConfirmChannel;
  /** When the connection or a channel of it closed (the broker took back the deliveries unsettled on it). */
  closedAt?: number;
  consumerTag?: string;
}

let stopping = false;
let session: Session | undefined;
let running = 0;

/** Connects and consumes; tries again every {@link RECONNECT_MS} until it does (or the worker stops). */
async function open(): Promise<void> {
  while (!stopping) {
    let model: ChannelModel | undefined;
    try {
      model = await bareConnect(url, connectionName);
      const s: Session = { model, consume: await model.createChannel(), publish: await model.createConfirmChannel() };
      let up = false;
      const lost = () => {
        if (s.closedAt !== undefined) return;
        s.closedAt = Date.now();
        if (session === s) session = undefined;
        void s.model.close().catch(() => undefined);
        if (up && !stopping) {
          console.error(`bare worker: connection lost at ${s.closedAt}; connecting again`);
          setTimeout(() => void open(), RECONNECT_MS);
        }
      };
      model.on('close', lost);
      for (const channel of [s.consume, s.publish]) {
        channel.on('error', () => undefined);
        channel.on('close', lost);
      }
      // As an amqplib application does: its queues declared before it consumes, so one that autoheal dropped comes back.
      await declareBareQueues(s.consume, config.queue, config.errorQueue);
      await s.consume.prefetch(config.concurrency);
      const { consumerTag } = await s.consume.consume(
        config.queue,
        (message) => {
          // A null message: the broker cancelled the consumer.
          if (message === null) lost();
          else void handle(s, message).catch((error: unknown) => console.error(`bare worker: ${(error as Error).message}`));
        },
        { noAck: false },
      );
      if (s.closedAt !== undefined) throw new Error('the connection closed as the consumer started');
      s.consumerTag = consumerTag;
      up = true;
      session = s;
      return;
    } catch (error) {
      console.error(`bare worker: could not consume (${(error as Error).message}); trying again`);
      await model?.close().catch(() => undefined);
      await sleep(RECONNECT_MS);
    }
  }
}

/** Settles `message` on its own channel; a channel that closed has returned it to the queue already. */
function settle(s: Session, message: ConsumeMessage, how: 'ack' | 'requeue'): void {
  try {
    if (how === 'ack') s.consume.ack(message);
    else s.consume.nack(message, false, true);
  } catch {
    // The channel closed: the broker gives the message out again.
  }
}

async function handle(s: Session, message: ConsumeMessage): Promise<void> {
  running++;
  try {
    const id = message.content.toString();
    const headers = message.properties.headers ?? {};
    const count = Number(headers['x-delivery-count'] ?? 0) + 1;
    const round = Number(headers[ROUND_HEADER] ?? 0);
    const startedAt = Date.now();
    let lostAt: number | undefined;
    const look = () => {
      if (lostAt === undefined && s.closedAt !== undefined) lostAt = Date.now();
    };
    const workUntil = startedAt + ((Number(id.slice(2)) * 7919) % (config.workMs + 1));
    for (let now = Date.now(); now < workUntil; now = Date.now()) {
      look();
      await sleep(Math.min(CHANNEL_CHECK_MS, workUntil - now));
    }
    const fails = attemptFails(behaviourOf(id, config.mix, config.seed), { attempt: round * ROUND + count, delayedAttempt: round, replayed: false });
    if (!fails) log.append(id);
    look();
    // The run ends before its settlement goes out, as a redeliver handler's does.
    holds?.append(`${id} ${round} ${count} ${startedAt} ${Date.now()} ${lostAt ?? '-'}`);
    if (!fails) {
      settle(s, message, 'ack');
    } else if (count < ROUND) {
      settle(s, message, 'requeue');
    } else if (round < DELAYED_RETRIES) {
      const expiration = String(config.delayStepMs * (round + 1));
      await publishConfirmed(s.publish, delayQueue, id, { expiration, headers: { [ROUND_HEADER]: round + 1 } }).then(
        () => settle(s, message, 'ack'),
        () => settle(s, message, 'requeue'),
      );
    } else {
      await publishConfirmed(s.publish, config.errorQueue, id).then(
        () => settle(s, message, 'ack'),
        () => settle(s, message, 'requeue'),
      );
    }
  } finally {
    running--;
  }
}

process.once('SIGTERM', () => {
  void (async () => {
    stopping = true;
    const s = session;
    // Each step bounded: a connection the network cut answers nothing.
    const bounded = (step: Promise<unknown> | undefined) => Promise.race([step?.catch(() => undefined), sleep(2_000)]);
    if (s?.consumerTag !== undefined) await bounded(s.consume.cancel(s.consumerTag));
    for (const deadline = Date.now() + 10_000; running > 0 && Date.now() < deadline; ) await sleep(20);
    await bounded(s?.model.close());
    log.close();
    holds?.close();
    process.exit(0);
  })();
});
await open();
console.log('ready');
