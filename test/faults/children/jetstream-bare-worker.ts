/**
 * The bare JetStream client beside redeliver in a fault scenario: a nats.js
 * pull consumer (`consume`) whose handler fails the attempts the same
 * failure mix says, and retries the way a plain JetStream consumer does,
 * all through the server: `-NAK` for an immediate retry, `-NAK` with the
 * delay for a delayed one, and after the last round a publish of the
 * message to its error stream, then `+ACK`. Same retry budget as the
 * redeliver worker (2 immediate retries, 2 delayed retries of
 * `delayStepMs`, then twice that), counted from the server's delivery
 * count. The body is the message id. The id of every successful handling is
 * appended to an fsync'd log before the ack; every handler run is recorded
 * in the holds log as the redeliver worker records it (delayed attempt 0:
 * every retry is a delivery of the one stream message). At most
 * `concurrency` messages are handled at once. Its pulls last 5 s with a
 * heartbeat every second, as redeliver's do by default. SIGTERM stops it.
 *
 * Usage: node --import tsx jetstream-bare-worker.ts '<WorkerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, type JsMsg } from '@nats-io/jetstream';
import { openEvidenceLog } from '../evidence-log.js';
import { attemptFails, behaviourOf } from '../failure-mix.js';
import { BARE_CONSUMER, bareConnect, bareNames } from './jetstream-bare-client.js';
import type { WorkerConfig } from './worker.js';

/** Attempts per round: the first and 2 immediate retries. */
const ROUND = 3;
/** Delayed retries before the error stream. */
const DELAYED_RETRIES = 2;

const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig;
if (config.transport.kind !== 'jetstream') throw new Error('jetstream-bare-worker: a jetstream transport spec is needed');
const log = openEvidenceLog(config.log);
const holds = config.holdsLog === undefined ? undefined : openEvidenceLog(config.holdsLog);
const nc = await bareConnect(config.transport.servers, config.transport.connectionName);
const js = jetstream(nc, { timeout: 5_000 });
const consumer = await js.consumers.get(bareNames(config.queue).stream, BARE_CONSUMER);
const errorSubject = bareNames(config.errorQueue).subject;

async function handle(message: JsMsg): Promise<void> {
  const id = message.string();
  const count = message.info.deliveryCount;
  const startedAt = Date.now();
  await sleep((Number(id.slice(2)) * 7919) % (config.workMs + 1));
  const round = Math.floor((count - 1) / ROUND);
  const attempt = ((count - 1) % ROUND) + 1;
  const fails = attemptFails(behaviourOf(id, config.mix, config.seed), { attempt: count, delayedAttempt: round, replayed: false });
  if (!fails) log.append(id);
  // The run ends before its settlement goes out, as a redeliver handler's does.
  holds?.append(`${id} 0 ${count} ${startedAt} ${Date.now()}`);
  if (!fails) {
    message.ack();
  } else if (attempt < ROUND) {
    message.nak();
  } else if (round < DELAYED_RETRIES) {
    message.nak(config.delayStepMs * (round + 1));
  } else {
    try {
      await js.publish(errorSubject, id, { msgID: id });
      message.ack();
    } catch {
      message.nak(config.delayStepMs);
    }
  }
}

// The pull settings of redeliver's JetStream transport (5 s pulls, a heartbeat every second), so both notice a silent server alike.
const messages = await consumer.consume({ max_messages: config.concurrency, expires: 5_000, idle_heartbeat: 1_000 });
let running = 0;
let freed: (() => void) | undefined;
process.once('SIGTERM', () => {
  void (async () => {
    await messages.close().catch(() => undefined);
    while (running > 0) await sleep(20);
    await nc.close();
    log.close();
    holds?.close();
    process.exit(0);
  })();
});
console.log('ready');
for await (const message of messages) {
  while (running >= config.concurrency) await new Promise<void>((resolve) => (freed = resolve));
  running++;
  void handle(message)
    .catch((error: unknown) => console.error(`bare worker: ${(error as Error).message}`))
    .finally(() => {
      running--;
      freed?.();
      freed = undefined;
    });
}
