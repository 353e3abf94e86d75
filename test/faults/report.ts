/** The fault table: one row per scenario and transport, then one JSON line. */
import type { ScenarioResult } from './run.js';

/** One table row, as text. */
export function formatRow(r: ScenarioResult): string {
  const cells = [r.name.padEnd(20), r.transport.padEnd(16)];
  if (r.skipped) return [...cells, `skipped: ${r.skipped}`].join(' ');
  const recovery = r.recoverySeconds === null ? 'never' : `${r.recoverySeconds} s`;
  const bareHolders = r.bareOverlaps === undefined ? '' : `, bare ${r.bareOverlaps}/${r.bareBrokerOverlaps ?? 0}`;
  const overlaps =
    r.overlaps === undefined ? '' : `  two holders ${String(r.overlaps).padStart(3)} (stale ${r.staleOverlaps ?? 0}, broker-repeated ${r.brokerOverlaps ?? 0}, copies ${r.copyOverlaps ?? 0}${bareHolders})`;
  const bare = r.bareMessages === undefined ? '' : `, bare client ${r.bareMessages} messages ${r.bareLost} lost ${r.bareDuplicates} duplicates`;
  const counts = `messages ${String(r.messages).padStart(5)}  lost ${String(r.lost).padStart(4)}  duplicates ${String(r.duplicates).padStart(4)}${overlaps}  recovery ${recovery.padStart(7)}`;
  const detail = `(handled ${r.handled}, error queue ${r.errored}, pending ${r.pending}${bare}${r.lost > 0 ? `, lost by behaviour ${JSON.stringify(r.lostByBehaviour)}, e.g. ${r.lostSample?.join(' ')}` : ''})`;
  const notes = r.notes && r.notes.length > 0 ? `\n${' '.repeat(38)}${r.notes.join('; ')}` : '';
  return [...cells, counts, detail].join(' ') + notes;
}

/** The closing JSON line; `failed` (why the run fails, one entry per failure) comes last, so a log cut to its tail still says why. */
export function jsonLine(results: readonly ScenarioResult[], elapsedSeconds: number, failed: readonly string[]): string {
  return JSON.stringify({ scenarios: results, elapsedSeconds, failed });
}
