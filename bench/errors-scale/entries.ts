/**
 * The error-queue entries of the errors-scale benchmark: what a
 * dead-lettering endpoint writes after an outage. Ten failure groups of
 * different sizes; the first is exactly 10 % of the entries (whenever the
 * count is a multiple of 100). Each entry carries the `redeliver-failure-*`
 * headers with a stack of ten frames, a retry history of three records, a
 * few user headers, and a 1 KiB JSON body.
 */
import { randomUUID } from 'node:crypto';
import { HEADER } from '../../src/headers/names.js';
import type { Headers } from '../../src/transport/types.js';

/** Bytes of every body. */
export const BODY_BYTES = 1024;

interface FailureKind {
  readonly reason: string;
  readonly errorName: string;
  /** The message of entry `i`: volatile parts (ids, numbers) that the signature normalises away. */
  readonly message: (i: number) => string;
  /** The function the error was thrown in: the top stack frame. */
  readonly thrownIn: string;
  /** Of every 100 entries, how many fail this way. */
  readonly share: number;
}

/** The ten failure groups. The first, 10 of every 100 entries, is the group the benchmark retries. */
export const FAILURE_KINDS: readonly FailureKind[] = [
  { reason: 'retries-exhausted', errorName: 'PaymentDeclinedError', message: (i) => `card declined for order ${i}: insufficient funds`, thrownIn: 'chargeCard', share: 10 },
  { reason: 'retries-exhausted', errorName: 'TimeoutError', message: (i) => `inventory service did not answer within 5000 ms (request ${i})`, thrownIn: 'reserveStock', share: 24 },
  { reason: 'retries-exhausted', errorName: 'FetchError', message: (i) => `request to https://tax.internal/rates/${i} failed, reason: connect ECONNREFUSED`, thrownIn: 'fetchTaxRate', share: 18 },
  { reason: 'unrecoverable', errorName: 'ValidationError', message: (i) => `order ${i} has no shipping address`, thrownIn: 'validateOrder', share: 14 },
  { reason: 'retries-exhausted', errorName: 'SqlError', message: (i) => `deadlock detected while updating row ${i} of table "orders"`, thrownIn: 'saveOrder', share: 11 },
  { reason: 'deserialization', errorName: 'SyntaxError', message: (i) => `Unexpected token } in JSON at position ${i % 900}`, thrownIn: 'decodeBody', share: 8 },
  { reason: 'retries-exhausted', errorName: 'RateLimitError', message: (i) => `mail provider refused: 429 too many requests, retry after ${i % 60} s`, thrownIn: 'sendConfirmation', share: 6 },
  { reason: 'unrecoverable', errorName: 'NotFoundError', message: (i) => `customer ${i} does not exist`, thrownIn: 'loadCustomer', share: 4 },
  { reason: 'retries-exhausted', errorName: 'TypeError', message: () => `Cannot read properties of undefined (reading 'sku')`, thrownIn: 'priceLines', share: 3 },
  { reason: 'policy', errorName: 'Error', message: (i) => `message ${i} is older than 24 h; discarded by policy`, thrownIn: 'checkAge', share: 2 },
];

/** The failure kind of entry `i`: position `i % 100` picks it by share. */
export function kindOf(i: number): number {
  let slot = i % 100;
  for (let k = 0; k < FAILURE_KINDS.length; k++) {
    slot -= FAILURE_KINDS[k]!.share;
    if (slot < 0) return k;
  }
  throw new Error('the shares of FAILURE_KINDS must add up to 100');
}

/** Entries of failure kind `k` among the first `n`. */
export function countOfKind(n: number, k: number): number {
  let count = 0;
  for (let i = 0; i < n; i++) if (kindOf(i) === k) count++;
  return count;
}

const FRAMES = [
  'at processTicksAndRejections (node:internal/process/task_queues:95:5)',
  'at async Handler.handle (/srv/orders/dist/handlers/order-placed.js:58:9)',
  'at async Endpoint.dispatch (/srv/orders/node_modules/redeliver/dist/endpoint/endpoint.js:412:7)',
  'at async Pipeline.run (/srv/orders/node_modules/redeliver/dist/endpoint/pipeline.js:77:5)',
  'at async withSpan (/srv/orders/dist/telemetry/tracing.js:31:14)',
  'at async Unit.commit (/srv/orders/dist/db/unit-of-work.js:102:11)',
  'at async Retry.attempt (/srv/orders/dist/clients/retry.js:44:20)',
  'at async Client.request (/srv/orders/dist/clients/http.js:130:18)',
];

/** The failure headers, retry history and user headers of entry `i`, failed on `workQueue` at `failedAt` (epoch ms). */
export function entryHeaders(i: number, failedAt: number, workQueue: string): Headers {
  const kind = FAILURE_KINDS[kindOf(i)]!;
  const message = kind.message(i);
  const stack = [`${kind.errorName}: ${message}`, `    at ${kind.thrownIn} (/srv/orders/dist/domain/${kind.thrownIn}.js:${20 + (i % 7)}:13)`, ...FRAMES.map((f) => `    ${f}`)].join('\n');
  const history = [0, 1, 2].map((attempt) => ({
    at: new Date(failedAt - (3 - attempt) * 10_000).toISOString(),
    errorName: kind.errorName,
    message,
    immediateAttempt: 1,
    delayedAttempt: attempt,
  }));
  return {
    'content-type': 'application/json',
    'x-trace-id': randomUUID().replaceAll('-', ''),
    'x-tenant': `tenant-${i % 17}`,
    [HEADER.attempts]: '4',
    [HEADER.delayedAttempts]: '3',
    [HEADER.history]: JSON.stringify(history),
    [HEADER.failureReason]: kind.reason,
    [HEADER.failureErrorName]: kind.errorName,
    [HEADER.failureMessage]: message,
    [HEADER.failureStack]: stack,
    [HEADER.failureTime]: new Date(failedAt).toISOString(),
    [HEADER.failureQueue]: workQueue,
    [HEADER.failureEndpoint]: 'orders-endpoint',
    [HEADER.failureHost]: `orders-${i % 4}`,
    [HEADER.failureImmediateAttempts]: '1',
    [HEADER.failureDelayedAttempts]: '3',
    [HEADER.failureAttempts]: '4',
  };
}

/** A 1 KiB JSON body for entry `i`. */
export function entryBody(i: number): Buffer {
  const head = `{"orderId":${i},"customer":"c-${i % 5000}","lines":[{"sku":"A-${i % 97}","qty":${1 + (i % 5)}}],"note":"`;
  const tail = '"}';
  return Buffer.from(head + 'x'.repeat(BODY_BYTES - head.length - tail.length) + tail);
}

/** When entry `i` of `n` failed: spread evenly over the hour before `now`, oldest first. */
export function failedAtOf(i: number, n: number, now: number): number {
  return now - 3_600_000 + Math.floor((i * 3_600_000) / n);
}
