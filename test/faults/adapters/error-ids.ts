/**
 * How the fault suite reads an error queue at the end of a run: the way an
 * operator reads any error queue, a RabbitMQ quorum one too, with
 * `redeliver errors ingest --once`. An ingester moves every entry into an
 * error store of the scenario's own (each copy acknowledged only once the
 * store committed it), and the ids are listed from the store. No in-place
 * read is involved, so nothing a transport refuses to browse (a quorum
 * queue, whose every read counts a delivery) hides an entry from the count.
 */
import { Ingester } from '../../../src/error-store/ingester.js';
import { ErrorStore, MAX_PAGE } from '../../../src/error-store/store.js';
import type { Transport } from '../../../src/transport/types.js';

/** The longest the ingest may take before the error queue counts as unreadable. */
const INGEST_TIMEOUT_MS = 120_000;

/**
 * The message ids of every entry in `errorQueue`, ingested into the error
 * store at `storePath` (created when missing). Empties the error queue:
 * call it once every worker has stopped. An id dead-lettered twice appears
 * twice.
 */
export async function ingestErrorIds(transport: Transport, errorQueue: string, storePath: string): Promise<string[]> {
  const store = ErrorStore.open(storePath);
  try {
    const ingester = new Ingester({ transport, store, errorQueues: [errorQueue] });
    await ingester.start();
    try {
      await ingester.untilIdle({ signal: AbortSignal.timeout(INGEST_TIMEOUT_MS) });
    } catch (error) {
      throw new Error(`ingesting '${errorQueue}' did not finish within ${INGEST_TIMEOUT_MS / 1000} s`, { cause: error });
    } finally {
      await ingester.stop();
    }
    return storedIds(store, errorQueue);
  } finally {
    store.close();
  }
}

/** Every stored entry's message id for `errorQueue`, page by page. */
function storedIds(store: ErrorStore, errorQueue: string): string[] {
  const filter = { errorQueue, status: 'any' } as const;
  let page = store.search(filter, { sort: 'failed-asc', limit: MAX_PAGE });
  const ids = page.entries.map((entry) => entry.messageId);
  while (page.next !== undefined) {
    page = store.search(filter, { sort: 'failed-asc', limit: MAX_PAGE, after: page.next });
    ids.push(...page.entries.map((entry) => entry.messageId));
  }
  return ids;
}
