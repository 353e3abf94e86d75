/**
 * The bare NSQ client beside redeliver in a fault scenario: an nsqjs Reader
 * whose handler fails the attempts the same failure mix says, and retries
 * the way a plain NSQ consumer does, all through nsqd: `REQ` with no delay
 * for an immediate retry, `REQ` with the delay for a delayed one, and after
 * the last round a `PUB` of the message to its error topic, then `FIN`.
 * Same retry budget as the redeliver worker (2 immediate retries, 2 delayed
 * retries of `delayStepMs`, then twice that). The body is the message id.
 * The id of every successful handling is appended to an fsync'd log before
 * the `FIN`. SIGTERM stops it gracefully.
 *
 * Usage: node --import tsx nsq-bare-worker.ts '<WorkerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import nsq from 'nsqjs';
import { openEvidenceLog } from '../evidence-log.js';
import { attemptFails, behaviourOf } from '../failure-mix.js';
import type { WorkerConfig } from './worker.js';
import { bareWriter, idNumber } from './nsq-bare-client.js';

/** Attempts per round: the first and 2 immediate retries. */
const ROUND = 3;
/** Delayed retries before the error topic. */
const DELAYED_RETRIES = 2;

const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig;
if (config.transport.kind !== 'nsq') throw new Error('nsq-bare-worker: an nsq transport spec is needed');
const spec = config.transport;
const log = openEvidenceLog(config.log);
const writer = bareWriter(spec.nsqd[0]!, `${spec.connectionName}-w`);

const reader = new nsq.Reader(config.queue, spec.channel ?? 'bare', {
  ...(spec.lookupd ? { lookupdHTTPAddresses: [...spec.lookupd] } : { nsqdTCPAddresses: [...spec.nsqd] }),
  lookupdPollInterval: 1,
  maxInFlight: config.concurrency,
  maxAttempts: 0,
  clientId: spec.connectionName,
});

reader.on('message', (message) => {
  void (async () => {
    const id = message.body.toString();
    await sleep((idNumber(id) * 7919) % (config.workMs + 1));
    const behaviour = behaviourOf(id, config.mix, config.seed);
    const round = Math.floor((message.attempts - 1) / ROUND);
    const attempt = ((message.attempts - 1) % ROUND) + 1;
    if (!attemptFails(behaviour, { attempt: message.attempts, delayedAttempt: round, replayed: false })) {
      log.append(id);
      message.finish();
    } else if (attempt < ROUND) {
      message.requeue(0, false);
    } else if (round < DELAYED_RETRIES) {
      message.requeue(config.delayStepMs * (round + 1), false);
    } else {
      try {
        await writer.publish(config.errorQueue, id);
        message.finish();
      } catch {
        message.requeue(config.delayStepMs, false);
      }
    }
  })();
});
reader.on('error', (error) => console.error(`bare worker: ${error.message}`));
reader.on('nsqd_closed', (host, port) => console.error(`bare worker: connection to ${host}:${port} closed`));

process.once('SIGTERM', () => {
  reader.close();
  writer.close();
  log.close();
  setTimeout(() => process.exit(0), 200);
});
reader.connect();
await new Promise<void>((resolve) => reader.once('nsqd_connected', () => resolve()));
console.log('ready');
