/**
 * How often a worker tried settlements that failed, read from its output:
 * the worker prints one line per `settlementFailed` event, with the time
 * in epoch milliseconds after {@link SETTLEMENT_FAILED} and the event's
 * outcome. An attempt the endpoint backs off from (`retrying`, and the last,
 * `released`) is a refused settlement of a delivery still held; a
 * `redelivered` one found its delivery gone (its lease ran out, its channel
 * closed) and is never tried again, so it is counted apart.
 */
import { existsSync, readFileSync } from 'node:fs';

/** What a worker's line about a `settlementFailed` event starts its fields with. */
export const SETTLEMENT_FAILED = 'settlement failed at';

/** The refused settlement attempts in the workers' `outputs`, the most of them in one second of wall time, and the attempts whose delivery was gone. */
export function settlementFailures(outputs: readonly string[]): { attempts: number; peakPerSecond: number; gone: number } {
  const perSecond = new Map<number, number>();
  let attempts = 0;
  let gone = 0;
  const line = new RegExp(`${SETTLEMENT_FAILED} (\\d+) .*?, (retrying|released|redelivered)\\)`);
  for (const output of outputs.filter((path) => existsSync(path))) {
    for (const text of readFileSync(output, 'utf8').split('\n')) {
      const match = line.exec(text);
      if (!match) continue;
      if (match[2] === 'redelivered') {
        gone++;
        continue;
      }
      attempts++;
      const second = Math.floor(Number(match[1]) / 1000);
      perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
    }
  }
  return { attempts, peakPerSecond: Math.max(0, ...perSecond.values()), gone };
}
