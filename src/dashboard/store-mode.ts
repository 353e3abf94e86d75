/**
 * Store mode of the dashboard: the error store it serves from, the
 * ingester it may run, and the API over the store, opened and closed
 * together.
 */
import { Ingester } from '../error-store/ingester.js';
import { RetryJobs } from '../error-store/retry-jobs.js';
import { ErrorStore } from '../error-store/store.js';
import { silentLogger } from '../logger.js';
import type { DashboardConfig } from './options.js';
import { STORE_GET_PATHS, STORE_POST_PATHS, StoreApi } from './store-api.js';
import { StoreRetries } from './store-retries.js';

/** What a dashboard in store mode runs. */
export interface StoreMode {
  readonly store: ErrorStore;
  readonly api: StoreApi;
  /** The POST paths the API answers. */
  readonly postPaths: ReadonlySet<string>;
  /** The POST paths that also answer a GET (a listing). */
  readonly getPaths: ReadonlySet<string>;
  /** The ingester, when the dashboard ingests. */
  readonly ingester: Ingester | undefined;
  /** Stops the ingester, then closes the store when the dashboard opened it. */
  close(): Promise<void>;
}

/** Opens the store (when given a path) and starts the ingester (when asked to). */
export async function openStoreMode(config: DashboardConfig): Promise<StoreMode> {
  const given = config.store!;
  const owned = typeof given === 'string';
  const store = owned ? ErrorStore.open(given, { clock: config.clock }) : given;
  let ingester: Ingester | undefined;
  try {
    if (config.ingest) {
      ingester = new Ingester({
        transport: config.transport,
        store,
        errorQueues: config.errorQueues,
        clock: config.clock,
        ...(config.logger === undefined ? {} : { logger: config.logger }),
        ...(config.ingest.outcomeQueue === undefined ? {} : { outcomeQueue: config.ingest.outcomeQueue }),
      });
      await ingester.start();
    }
  } catch (error) {
    if (owned) store.close();
    throw error;
  }
  const logger = config.logger ?? silentLogger;
  const retries = new StoreRetries(new RetryJobs({ store, transport: config.transport, clock: config.clock, logger }), config.allowedQueues, logger);
  let closed: Promise<void> | undefined;
  return {
    store,
    api: new StoreApi(store, config.clock, config.bodyPreviewBytes, retries),
    postPaths: STORE_POST_PATHS,
    getPaths: STORE_GET_PATHS,
    ingester,
    close() {
      closed ??= (async () => {
        try {
          await retries.close();
          await ingester?.stop();
        } finally {
          if (owned) store.close();
        }
      })();
      return closed;
    },
  };
}
