/**
 * The bare NSQ client's producer beside redeliver's: publishes messages
 * `from` to `to - 1` (body: the id `m-<i>`) with nsqjs, a window of them at
 * a time, and appends each id to an fsync'd log once nsqd answered OK. A
 * publish that fails is tried again every 500 ms for 60 s, then written to
 * the failure log.
 *
 * Usage: node --import tsx nsq-bare-producer.ts '<ProducerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { openEvidenceLog } from '../evidence-log.js';
import type { ProducerConfig } from './producer.js';
import { bareWriter } from './nsq-bare-client.js';

const RETRY_FOR_MS = 60_000;

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
if (config.transport.kind !== 'nsq') throw new Error('nsq-bare-producer: an nsq transport spec is needed');
const log = openEvidenceLog(config.log);
const failed = openEvidenceLog(config.failedLog);
const writer = bareWriter(config.transport.nsqd[0]!, config.transport.connectionName);

let next = config.from;
async function lane(): Promise<void> {
  while (next < config.to) {
    const id = `m-${next++}`;
    const deadline = Date.now() + RETRY_FOR_MS;
    for (;;) {
      try {
        await writer.publish(config.queue, id);
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
writer.close();
log.close();
failed.close();
process.exit(0);
