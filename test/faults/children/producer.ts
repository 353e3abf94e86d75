/**
 * A fault-suite producer: sends messages `from` to `to - 1` (ids `m-<i>`)
 * through a Producer, a window of them at a time, and appends each id to an
 * fsync'd log only after its `send` resolved. A send that fails for good is
 * written to the failure log instead. Exits 0 when every send has settled.
 * With `holdAt`, the same process (and connection) pauses there until the
 * harness creates `holdFile`.
 *
 * Usage: node --import tsx producer.ts '<ProducerConfig as JSON>'
 */
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Producer } from '../../../src/producer/producer.js';
import { openEvidenceLog } from '../evidence-log.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';

/** What a producer is told on its command line. */
export interface ProducerConfig {
  readonly transport: TransportSpec;
  readonly queue: string;
  readonly from: number;
  readonly to: number;
  readonly log: string;
  readonly failedLog: string;
  /** Sends in flight at once. */
  readonly window: number;
  /** Before sending message `holdAt`, wait (with every earlier send resolved) until `holdFile` exists. Default: no hold. */
  readonly holdAt?: number;
  readonly holdFile?: string;
}

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
const log = openEvidenceLog(config.log);
const failed = openEvidenceLog(config.failedLog);
const transport = openSpec(config.transport);
const producer = new Producer<{ i: number }>({ transport });

let next = config.from;
let inFlight = 0;
let resumed = false;
/**
 * Takes the next message to send (counted in flight), or undefined when all
 * are taken. At `holdAt` it first waits for every earlier send and for
 * `holdFile`; the last check and the take happen in one step, so no lane
 * slips past the hold.
 */
async function take(): Promise<number | undefined> {
  while (!resumed && config.holdAt !== undefined && config.holdFile && next === config.holdAt) {
    if (inFlight === 0 && existsSync(config.holdFile)) resumed = true;
    else await sleep(20);
  }
  if (next >= config.to) return undefined;
  inFlight++;
  return next++;
}
async function lane(): Promise<void> {
  for (let i = await take(); i !== undefined; i = await take()) {
    const id = `m-${i}`;
    try {
      await producer.send(config.queue, { i }, { id });
      log.append(id);
    } catch (error) {
      failed.append(id);
      console.error(`producer: send of ${id} failed: ${(error as Error).message}`);
    }
    inFlight--;
  }
}
await Promise.all(Array.from({ length: config.window }, lane));
await transport.close();
log.close();
failed.close();
process.exit(0);
