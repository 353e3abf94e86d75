/**
 * The bare JetStream client's producer beside redeliver's: publishes
 * messages `from` to `to - 1` (body: the id `m-<i>`, `Nats-Msg-Id` the id)
 * with nats.js, a window of them at a time, and appends each id to an
 * fsync'd log once the stream acknowledged it. A publish that fails is tried
 * again every 500 ms for 60 s (the same id, so the stream stores it once),
 * then written to the failure log.
 *
 * Usage: node --import tsx jetstream-bare-producer.ts '<ProducerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream } from '@nats-io/jetstream';
import { openEvidenceLog } from '../evidence-log.js';
import { bareConnect, bareNames } from './jetstream-bare-client.js';
import type { ProducerConfig } from './producer.js';

const RETRY_FOR_MS = 60_000;

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
if (config.transport.kind !== 'jetstream') throw new Error('jetstream-bare-producer: a jetstream transport spec is needed');
const log = openEvidenceLog(config.log);
const failed = openEvidenceLog(config.failedLog);
const nc = await bareConnect(config.transport.servers, config.transport.connectionName);
const js = jetstream(nc, { timeout: 5_000 });
const { subject } = bareNames(config.queue);

let next = config.from;
async function lane(): Promise<void> {
  while (next < config.to) {
    const id = `m-${next++}`;
    const deadline = Date.now() + RETRY_FOR_MS;
    for (;;) {
      try {
        await js.publish(subject, id, { msgID: id });
        log.append(id);
        break;
      } catch (error) {
        if (Date.now() > deadline) {
          failed.append(id);
          console.error(`bare producer: publish of ${id} failed: ${(error as Error).message}`);
          break;
        }
        await sleep(500);
      }
    }
  }
}
await Promise.all(Array.from({ length: config.window }, lane));
await nc.close();
log.close();
failed.close();
process.exit(0);
