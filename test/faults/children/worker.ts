/**
 * A fault-suite worker: consumes one queue with an Endpoint whose handler
 * fails the attempts the failure mix says, and appends the id of every
 * successful handling to an fsync'd log before returning (so before the
 * ack: a kill between the two shows up as a duplicate, never as a loss).
 * SIGTERM stops it gracefully.
 *
 * Usage: node --import tsx worker.ts '<WorkerConfig as JSON>'
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Endpoint } from '../../../src/endpoint/endpoint.js';
import { HEADER } from '../../../src/headers/names.js';
import { linear } from '../../../src/backoff/linear.js';
import { openEvidenceLog } from '../evidence-log.js';
import { attemptFails, behaviourOf, type FailureMix } from '../failure-mix.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { SETTLEMENT_FAILED } from '../settlement-rate.js';

/** What a worker is told on its command line. */
export interface WorkerConfig {
  readonly transport: TransportSpec;
  readonly queue: string;
  readonly errorQueue: string;
  readonly log: string;
  readonly mix: FailureMix;
  readonly seed: number;
  readonly concurrency: number;
  /** The delayed-retry step: retries wait this, then twice this. */
  readonly delayStepMs: number;
  /** The longest a handler works, in ms (each message works a seeded share of it). */
  readonly workMs: number;
  /** The SQLite lease: how soon a killed worker's messages come back. */
  readonly leaseMs: number;
  /**
   * Where to record every handler run, failing ones too: `<id> <delayed attempt> <delivery count> <start> <end>
   * <lease lost>` (epoch ms; the lease lost when the run first saw `ctx.leaseExpired()`, `-` when it never did). The
   * delayed attempt tells a copy from the copy a delayed retry made of it; the delivery count is the broker's, for
   * diagnosis. Default: not recorded.
   */
  readonly holdsLog?: string;
}

/** How often a handler run looks at its lease while it works. */
const LEASE_CHECK_MS = 5;

const config = JSON.parse(process.argv[2] ?? '') as WorkerConfig;
const log = openEvidenceLog(config.log);
const holds = config.holdsLog === undefined ? undefined : openEvidenceLog(config.holdsLog);
const transport = openSpec(config.transport);

class InjectedFailure extends Error {
  override readonly name = 'InjectedFailure';
}

const endpoint = new Endpoint<{ i: number }>({
  name: 'faults-worker',
  queue: config.queue,
  transport,
  concurrency: config.concurrency,
  leaseMs: config.leaseMs,
  recoverability: {
    immediateRetries: 2,
    delayedRetries: 2,
    delayedBackoff: linear(config.delayStepMs),
    errorQueue: config.errorQueue,
  },
  handler: async (message, context) => {
    // The wall clock: the one clock every process of the run reads alike (each process's performance.timeOrigin is off by milliseconds).
    const startedAt = Date.now();
    let leaseLostAt: number | undefined;
    const checkLease = () => {
      if (leaseLostAt === undefined && context.leaseExpired()) leaseLostAt = Date.now();
    };
    try {
      // The work; where runs are recorded, in steps that look at the lease, so the record says when this run learnt it was lost.
      const workUntil = startedAt + ((message.i * 7919) % (config.workMs + 1));
      const step = holds ? LEASE_CHECK_MS : Infinity;
      for (let now = Date.now(); now < workUntil; now = Date.now()) {
        checkLease();
        await sleep(Math.min(step, workUntil - now));
      }
      const behaviour = behaviourOf(context.messageId, config.mix, config.seed);
      const replayed = context.headers[HEADER.replayCount] !== undefined;
      if (attemptFails(behaviour, { attempt: context.attempt, delayedAttempt: context.delayedAttempt, replayed })) {
        throw new InjectedFailure(`injected failure (${behaviour})`);
      }
      log.append(context.messageId);
    } finally {
      checkLease();
      holds?.append(`${context.messageId} ${context.delayedAttempt} ${context.deliveryCount} ${startedAt} ${Date.now()} ${leaseLostAt ?? '-'}`);
    }
  },
});

endpoint.on('settlementFailed', (e) =>
  console.error(`worker ${process.pid}: ${SETTLEMENT_FAILED} ${Date.now()} for ${e.messageId} (${e.action}, attempt ${e.attempt}, ${e.outcome}): ${String(e.error)}`),
);
process.once('SIGTERM', () => {
  void (async () => {
    await endpoint.stop();
    await transport.close();
    log.close();
    holds?.close();
    process.exit(0);
  })();
});
await endpoint.start();
console.log('ready');
