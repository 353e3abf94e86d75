/**
 * Runs once around the whole `vitest run`: before it, removes what earlier
 * (aborted) runs left on the shared brokers; after it, removes the default
 * delay topology the files shared, and names anything else a test left
 * behind (a test that declares topology must delete it). See
 * `support/sweep.ts` for which names are a test's, and why a broker that
 * other clients are using is left alone.
 */
import { describeSweep, sweepSharedBrokers, testStreamsCreatedSince } from './support/sweep.js';

export async function setup(): Promise<() => Promise<void>> {
  const startedAt = Date.now();
  const before = await sweepSharedBrokers();
  const removed = describeSweep(before);
  if (removed.length > 0) console.info(`Removed what earlier test runs left on the shared brokers:\n  ${removed.join('\n  ')}`);
  if (before.skipped.length > 0) console.info(`Not swept before the run: ${before.skipped.join(', ')}`);
  return async () => {
    const after = await sweepSharedBrokers();
    const leaks = describeSweep(after, true);
    // Streams are only swept once stale: name the ones this run made and left.
    const streams = await testStreamsCreatedSince(startedAt);
    if (streams.length > 0) leaks.push(`JetStream streams (not removed): ${streams.join(', ')}`);
    // Another worktree's run on the same brokers can have left some of these too.
    if (leaks.length > 0) console.warn(`\n!!! Left on the shared brokers after the run (the test that made them must delete them): !!!\n  ${leaks.join('\n  ')}\n`);
    if (after.skipped.length > 0) console.info(`Not swept after the run: ${after.skipped.join(', ')}`);
  };
}
