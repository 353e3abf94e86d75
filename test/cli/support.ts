/**
 * Helpers for the CLI tests: run the `redeliver` program in-process with
 * captured output, and fill an error queue through a real endpoint whose
 * handler fails in several distinct ways.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerErrors } from '../../src/cli/commands/errors.js';
import { registerStats } from '../../src/cli/commands/stats.js';
import { buildProgram, runProgram, type OutputStream } from '../../src/cli/program.js';
import { jsonCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { UnrecoverableError } from '../../src/policy/errors.js';
import { deleteEachByKey, sendBackEachByKey } from '../../src/operations/bulk.js';
import type { ErrorQueueOperations } from '../../src/transport/error-queue.js';
import type { Delivery, Transport } from '../../src/transport/types.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';

/** An output stream that keeps what was written. */
export function capture(options: { isTTY?: boolean } = {}): OutputStream & { text: string } {
  const stream = {
    text: '',
    isTTY: options.isTTY ?? false,
    write(chunk: string) {
      stream.text += chunk;
      return true;
    },
  };
  return stream;
}

/** What one in-process run of the CLI produced. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `redeliver <args>` in-process with the errors and stats commands. */
export async function cli(
  args: readonly string[],
  options: {
    openTransport?: (target: string) => Promise<Transport>;
    signal?: AbortSignal;
    stderrIsTTY?: boolean;
    /** The environment the command sees. Default: none at all, so a test never depends on the caller's. */
    env?: Record<string, string | undefined>;
  } = {},
): Promise<CliRun> {
  const stdout = capture();
  const stderr = capture({ isTTY: options.stderrIsTTY ?? false });
  const program = buildProgram({
    stdout,
    stderr,
    ...(options.openTransport ? { openTransport: options.openTransport } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    env: options.env ?? {},
  });
  registerErrors(program);
  registerStats(program);
  const code = await runProgram(program, ['node', 'redeliver', ...args]);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** A folder of SQLite files, removed by `cleanup`. */
export function tempFolder(): { path: (name: string) => string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-cli-'));
  return { path: (name) => join(dir, name), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Opens a SQLite transport on `path` that polls often (tests wait on it). */
export function sqlite(path: string): SqliteTransport {
  return new SqliteTransport({ path, pollIntervalMs: 20 });
}

/** What the test handler does with a message. */
export type FailureKind = 'timeout' | 'invalid' | 'refused' | 'ok';

/** The failures the fill produces, and the ids of the messages of each kind. */
export interface Filled {
  readonly queue: string;
  readonly ids: Record<Exclude<FailureKind, 'ok'> | 'binary', string[]>;
  readonly total: number;
}

class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

class ValidationError extends UnrecoverableError {
  override readonly name = 'ValidationError';
}

/** Fails like a slow payment gateway: the message carries an order number and a uuid. */
function chargeCard(n: number): never {
  throw new TimeoutError(`charge ${n} for order ${randomUUID()} timed out after ${1000 + n * 7} ms`);
}

/** Fails validation for good (no retries): the message quotes the bad value. */
function validateOrder(n: number): never {
  throw new ValidationError(`order ${n} has an invalid sku "SKU-${n * 13}"`);
}

/** Fails like a database that is down: host and port in the message. */
function connectDatabase(n: number): never {
  throw new Error(`connect ECONNREFUSED 10.0.${n}.7:5432`);
}

/**
 * Sends messages to `queue` and runs an endpoint (two immediate retries, no
 * delayed retries) whose handler fails by kind, until every message is in
 * the error queue: `timeout` (retries exhausted, a TimeoutError with a
 * number and a uuid), `invalid` (unrecoverable, a quoted value), `refused`
 * (retries exhausted, an address), and `binary` bodies that are not JSON
 * (deserialization). Messages of each kind are sent interleaved.
 */
export async function fillErrorQueue(
  transport: Transport,
  counts: { timeout?: number; invalid?: number; refused?: number; binary?: number; ok?: number },
  queue = 'orders',
  errorQueue = 'error',
): Promise<Filled> {
  const ids: Filled['ids'] = { timeout: [], invalid: [], refused: [], binary: [] };
  const endpoint = new Endpoint<{ kind: FailureKind; n: number }>({
    name: queue,
    transport,
    concurrency: 4,
    recoverability: { immediateRetries: 2, delayedRetries: 0, errorQueue },
    codec: jsonCodec as never,
    handler: (message) => {
      if (message.kind === 'timeout') chargeCard(message.n);
      if (message.kind === 'invalid') validateOrder(message.n);
      if (message.kind === 'refused') connectDatabase(message.n);
    },
  });
  const plan: (FailureKind | 'binary')[] = [];
  const max = Math.max(counts.timeout ?? 0, counts.invalid ?? 0, counts.refused ?? 0, counts.binary ?? 0, counts.ok ?? 0);
  for (let i = 0; i < max; i++) {
    for (const kind of ['timeout', 'invalid', 'refused', 'binary', 'ok'] as const) if (i < (counts[kind] ?? 0)) plan.push(kind);
  }
  let n = 0;
  for (const kind of plan) {
    n++;
    const id = `${kind}-${n}`;
    if (kind === 'binary') {
      await transport.send(queue, { id, body: new Uint8Array([0xff, 0x00, 0xfe, n & 0xff, 0x10, 0x80]), headers: { 'content-type': 'application/octet-stream' } });
      ids.binary.push(id);
      continue;
    }
    await transport.send(queue, { id, body: jsonCodec.encode({ kind, n }), headers: { 'x-tenant': 'acme' } });
    if (kind !== 'ok') ids[kind].push(id);
  }
  const failing = plan.filter((k) => k !== 'ok').length;
  await endpoint.start();
  await waitFor(() => endpoint.stats.deadLettered >= failing && endpoint.stats.handled >= plan.length - failing, 30_000, 'messages to settle');
  await endpoint.stop();
  return { queue, ids, total: failing };
}

/**
 * A view of `transport` for a command: `close` is replaced by `onClose`
 * (default: nothing, so an in-memory transport survives the command), and
 * error-queue operations can be overridden one by one.
 */
export function wrap(
  transport: Transport,
  options: { errorQueue?: Partial<ErrorQueueOperations> | null; inspection?: null; onClose?: () => Promise<void> } = {},
): Transport {
  const ops = transport.errorQueue;
  const errorQueue: ErrorQueueOperations | undefined =
    options.errorQueue === null || !ops
      ? undefined
      : {
          count: (q) => ops.count(q),
          browse: (q, o) => ops.browse(q, o),
          get: (q, k) => ops.get(q, k),
          sendBack: (q, k, o) => ops.sendBack(q, k, o),
          delete: (q, k) => ops.delete(q, k),
          purge: (q) => ops.purge(q),
          scan: (q, o) => ops.scan(q, o),
          sendBackEach: (q, o) => ops.sendBackEach(q, o),
          deleteEach: (q, o) => ops.deleteEach(q, o),
          ...options.errorQueue,
        };
  // An overridden sendBack or delete also serves the bulk operations, one entry at a time by key.
  if (errorQueue && options.errorQueue?.sendBack && !options.errorQueue.sendBackEach) {
    errorQueue.sendBackEach = (q, o) => sendBackEachByKey(errorQueue, q, o);
  }
  if (errorQueue && options.errorQueue?.delete && !options.errorQueue.deleteEach) {
    errorQueue.deleteEach = (q, o) => deleteEachByKey(errorQueue, q, o);
  }
  const inspection = options.inspection === null ? undefined : transport.inspection;
  return {
    name: transport.name,
    capabilities: transport.capabilities,
    ...(errorQueue ? { errorQueue } : {}),
    ...(inspection ? { inspection } : {}),
    send: (q, m) => transport.send(q, m),
    consume: (q, l, o) => transport.consume(q, l, o),
    close: options.onClose ?? (async () => undefined),
  };
}

/** Resolves once `predicate` holds, polling every 10 ms. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Consumes `queue`, acking everything, until `expected` deliveries arrived
 * (or 10 s passed), then `settleMs` more so a duplicate would show; resolves
 * the deliveries.
 */
export async function drain(transport: Transport, queue: string, expected: number, settleMs = 300): Promise<Delivery[]> {
  const got: Delivery[] = [];
  const sub = await transport.consume(queue, (d) => {
    got.push(d);
    void d.ack();
  }, { prefetch: 100 });
  await waitFor(() => got.length >= expected, 10_000, `${expected} deliveries on ${queue}`).catch(() => undefined);
  // Wait a little longer: a duplicate would show up here.
  await new Promise((r) => setTimeout(r, settleMs));
  await sub.close();
  return got;
}
