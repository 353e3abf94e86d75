/**
 * Runs once around the whole `vitest run`: before it, removes what earlier
 * (aborted) runs left on the shared brokers; after it, removes the default
 * delay topology the files shared, and names anything else a test left
 * behind (a test that declares topology must delete it). See
 * `support/sweep.ts` for which names are a test's.
 */
import { describeSweep, sweepSharedBrokers } from './support/sweep.js';

export async function setup(): Promise<() => Promise<void>> {
  const before = describeSweep(await sweepSharedBrokers());
  if (before.length > 0) console.info(`Removed what earlier test runs left on the shared brokers:\n  ${before.join('\n  ')}`);
  return async () => {
    const after = await sweepSharedBrokers();
    const leaks = describeSweep(after, true);
    if (leaks.length > 0) console.warn(`\n!!! Tests left these on the shared brokers (removed now; the test that made them must delete them): !!!\n  ${leaks.join('\n  ')}\n`);
    if (after.skipped.length > 0) console.info(`Not swept (not reachable): ${after.skipped.join(', ')}`);
  };
}
