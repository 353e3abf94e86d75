/**
 * The BullMQ side of `npm run bench -- redis`: a Queue and a Worker on a
 * prefix of their own, jobs removed when they complete or fail for good (as
 * redeliver removes a message on ack), so neither side keeps a history.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { deleteKeys } from './cleanup.js';
import { countdown, messageName, paced, summariseLateness, within, type LatenessSummary, type Throughput } from './workload.js';

/** Jobs per `addBulk` call. */
const ADD_CHUNK = 1_000;

export interface BullmqSetup {
  readonly url: string;
  /** The key prefix of this side's queues; every key under it is deleted afterwards. */
  readonly prefix: string;
  readonly concurrency: number;
  readonly payload: string;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

interface JobData {
  readonly i: number;
  readonly payload: string;
}

function connection(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

/** A queue named `name` under the side's prefix, obliterated with every key under it once `fn` is done. */
async function withQueue<T>(setup: BullmqSetup, name: string, fn: (queue: Queue<JobData>) => Promise<T>): Promise<T> {
  const queue = new Queue<JobData>(name, { connection: connection(setup.url), prefix: setup.prefix });
  try {
    await queue.waitUntilReady();
    return await fn(queue);
  } finally {
    await queue.obliterate({ force: true });
    await queue.close();
    await deleteKeys(setup.url, `${setup.prefix}:${name}:*`);
  }
}

/**
 * `n` jobs added first; then a Worker of concurrency `setup.concurrency`
 * processes them with a handler that does nothing, except that the jobs
 * marked in `failing` throw on their first attempt (`attempts: 2`, no
 * backoff). Timed from the worker's start to the last job completed.
 */
export function bullmqThroughput(setup: BullmqSetup, label: Throughput['case'], n: number, failing: readonly boolean[]): Promise<Throughput> {
  return withQueue(setup, `${label}-${Date.now()}`, async (queue) => {
    for (let i = 0; i < n; i += ADD_CHUNK) {
      const jobs = [];
      for (let j = i; j < Math.min(n, i + ADD_CHUNK); j++) {
        jobs.push({
          name: messageName('m', j),
          data: { i: j, payload: setup.payload },
          opts: { attempts: failing[j] ? 2 : 1, removeOnComplete: true, removeOnFail: true },
        });
      }
      await queue.addBulk(jobs);
    }
    const completed = countdown(n);
    const errors: unknown[] = [];
    let failed = 0;
    const worker = new Worker<JobData>(
      queue.name,
      async (job: Job<JobData>) => {
        if (failing[job.data.i] && job.attemptsMade === 0) throw new Error('transient failure');
      },
      { connection: connection(setup.url), prefix: setup.prefix, concurrency: setup.concurrency, autorun: false },
    );
    worker.on('completed', () => completed.tick());
    worker.on('failed', () => failed++);
    worker.on('error', (error) => errors.push(error));
    try {
      await worker.waitUntilReady();
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      void worker.run();
      await within(completed.done, setup.timeoutMs, `bullmq ${label}`);
      const drainMs = performance.now() - t0;
      const cpuUsed = process.cpuUsage(cpu);
      if (errors.length > 0) throw new Error(`bullmq ${label}: ${errors.length} worker errors; first: ${String(errors[0])}`);
      const expected = failing.slice(0, n).filter(Boolean).length;
      if (failed !== expected) throw new Error(`bullmq ${label}: ${failed} failed attempts, expected ${expected}`);
      return {
        side: 'bullmq',
        case: label,
        messages: n,
        drainMs: Math.round(drainMs),
        perSec: Math.round((n * 1000) / drainMs),
        cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000),
      };
    } finally {
      await worker.close();
    }
  });
}

/**
 * One delayed job per delay, added at `rate` per second while a worker
 * waits; lateness = the handler's start - (the job's timestamp, set by
 * BullMQ when it is added, + its delay).
 */
export function bullmqDelayLateness(setup: BullmqSetup, delays: readonly number[], rate: number): Promise<LatenessSummary> {
  return withQueue(setup, `delayed-${Date.now()}`, async (queue) => {
    const lateness: number[] = [];
    const handled = countdown(delays.length);
    const worker = new Worker<JobData>(
      queue.name,
      async (job: Job<JobData>) => {
        const started = Date.now();
        lateness.push(started - (job.timestamp + delays[job.data.i]!));
        handled.tick();
      },
      { connection: connection(setup.url), prefix: setup.prefix, concurrency: setup.concurrency },
    );
    try {
      await worker.waitUntilReady();
      await paced(delays.length, rate, async (i) => {
        await queue.add(messageName('d', i), { i, payload: setup.payload }, { delay: delays[i]!, removeOnComplete: true, removeOnFail: true });
      });
      await within(handled.done, setup.timeoutMs + Math.max(...delays), 'bullmq delays');
      return summariseLateness(lateness);
    } finally {
      await worker.close();
    }
  });
}
