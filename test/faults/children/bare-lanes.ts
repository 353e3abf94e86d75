/**
 * What the bare clients' producers share: messages `from` to `to - 1`
 * (ids `m-<i>`) published a window of them at a time, each id appended to
 * the fsync'd log once its publish resolved. A publish that fails is tried
 * again every 500 ms for 60 s, then written to the failure log.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { openEvidenceLog } from '../evidence-log.js';
import type { ProducerConfig } from './producer.js';

const RETRY_FOR_MS = 60_000;
const RETRY_EVERY_MS = 500;

/**
 * Publishes every message of `config` with `publish`. Resolves once every
 * message is confirmed or written to the failure log, with both logs closed.
 */
export async function publishAll(config: ProducerConfig, publish: (id: string) => Promise<void>): Promise<void> {
  const log = openEvidenceLog(config.log);
  const failed = openEvidenceLog(config.failedLog);
  let next = config.from;
  const lane = async (): Promise<void> => {
    while (next < config.to) {
      const id = `m-${next++}`;
      const deadline = Date.now() + RETRY_FOR_MS;
      for (;;) {
        try {
          await publish(id);
          log.append(id);
          break;
        } catch (error) {
          if (Date.now() > deadline) {
            failed.append(id);
            console.error(`bare producer: publish of ${id} failed: ${(error as Error).message}`);
            break;
          }
          await sleep(RETRY_EVERY_MS);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: config.window }, lane));
  log.close();
  failed.close();
}
