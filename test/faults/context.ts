/**
 * What a scenario works with: its scope on the transport, its worker and
 * producer processes, the evidence so far, and the faults. Broker faults on
 * a transport whose store lives in the worker's process fall back to the
 * worker: a broker kill is a worker kill -9, a graceful broker restart a
 * worker SIGTERM, each followed by a restart.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FaultAdapter, Scope } from './adapters/types.js';
import type { ProducerConfig } from './children/producer.js';
import type { WorkerConfig } from './children/worker.js';
import { readEvidence } from './evidence-log.js';
import { DEFAULT_MIX, type FailureMix } from './failure-mix.js';
import type { CountedHold } from './holders.js';
import { Child } from './processes.js';

const WORKER = 'test/faults/children/worker.ts';
const PRODUCER = 'test/faults/children/producer.ts';
/** The lease workers are given (their endpoint's `leaseMs`). */
export const WORKER_LEASE_MS = 2_000;
/** How long a worker may take to start (FaultAdapter.workerStartMs) by default. */
const WORKER_START_MS = 60_000;

/** How a scenario's workers and producer behave. */
export interface Workload {
  /** Messages the scenario sends. */
  readonly messages: number;
  /** Which attempts fail. Default {@link DEFAULT_MIX}. */
  readonly mix?: FailureMix;
  /** Delayed retries wait this, then twice this. Default 500 ms. */
  readonly delayStepMs?: number;
  /** The longest a handler works. Default 10 ms. */
  readonly workMs?: number;
  /** Workers record every handler run, for the one-holder check (see {@link ScenarioContext.holds}). Default false. */
  readonly holds?: boolean;
}

export class ScenarioContext {
  /** Each worker's concurrency. */
  readonly concurrency = 16;
  readonly workers: Child[] = [];
  readonly producers: Child[] = [];
  readonly notes: string[] = [];
  /** When the last fault ended (ms since the epoch); recovery is counted from here. */
  lastFaultAt: number | undefined;
  /**
   * The broker's bare client in the same scenario, on a scope of its own:
   * every worker and producer started here starts there too, every worker
   * stopped or killed here is there too. The scenario's progress (handled,
   * confirmed) is this context's alone.
   */
  twin: ScenarioContext | undefined;
  #workerCount = 0;
  #producerCount = 0;

  constructor(
    readonly adapter: FaultAdapter,
    readonly scope: Scope,
    readonly dir: string,
    readonly workload: Required<Workload>,
    readonly seed: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Starts a worker process on the scope's queue (and one of the twin's); resolves once it consumes. */
  async startWorker(): Promise<Child> {
    const [child] = await Promise.all([this.#startWorker(), this.twin?.startWorker()]);
    return child;
  }

  async #startWorker(): Promise<Child> {
    const n = ++this.#workerCount;
    const config: WorkerConfig = {
      transport: this.scope.spec(`worker-${n}`),
      queue: this.scope.queue,
      errorQueue: this.scope.errorQueue,
      log: join(this.dir, `worker-${n}.log`),
      mix: this.workload.mix,
      seed: this.seed,
      concurrency: this.concurrency,
      delayStepMs: this.workload.delayStepMs,
      workMs: this.workload.workMs,
      leaseMs: WORKER_LEASE_MS,
      holdsLog: this.workload.holds ? join(this.dir, `worker-${n}.holds`) : undefined,
    };
    const output = join(this.dir, `worker-${n}.out`);
    const child = Child.start(`worker-${n}`, this.scope.children?.worker ?? WORKER, [JSON.stringify(config)], output, {}, this.#place(`worker-${n}`));
    this.workers.push(child);
    await this.waitUntil(`worker-${n} to start`, this.adapter.workerStartMs ?? WORKER_START_MS, () => fileIncludes(output, 'ready') || !child.running);
    if (!child.running) throw new Error(`worker-${n} exited at start with code ${child.code}; see ${output}`);
    return child;
  }

  /**
   * Starts a producer process sending messages `from` to `to - 1`, pausing
   * before `hold.at` until `hold.file` exists, to broker node `node` where
   * the scope has several (and the twin's producer alike).
   */
  startProducer(from = 0, to = this.workload.messages, hold?: { at: number; file: string }, node?: number): Child {
    this.twin?.startProducer(from, to, hold, node);
    const n = ++this.#producerCount;
    const config: ProducerConfig = {
      transport: this.scope.spec(`producer-${n}`, node),
      queue: this.scope.queue,
      from,
      to,
      log: join(this.dir, `producer-${n}.log`),
      failedLog: join(this.dir, `producer-${n}.failed`),
      window: 20,
      holdAt: hold?.at,
      holdFile: hold?.file,
    };
    const child = Child.start(`producer-${n}`, this.scope.children?.producer ?? PRODUCER, [JSON.stringify(config)], join(this.dir, `producer-${n}.out`), {}, this.#place(`producer-${n}`));
    this.producers.push(child);
    return child;
  }

  /** The output files of every worker started so far (their stdout and stderr). */
  workerOutputs(): string[] {
    return Array.from({ length: this.#workerCount }, (_, i) => join(this.dir, `worker-${i + 1}.out`));
  }

  /** Kills every running worker (the twin's too) with SIGKILL. */
  async killWorkers(): Promise<void> {
    await Promise.all([...this.workers.filter((w) => w.running).map((w) => w.kill9()), this.twin?.killWorkers()]);
  }

  /** Stops every running worker (the twin's too) gracefully. */
  async stopWorkers(): Promise<void> {
    await Promise.all([...this.workers.filter((w) => w.running).map((w) => w.stop()), this.twin?.stopWorkers()]);
  }

  /** Ids whose send resolved, from the producers' logs. */
  confirmed(): string[] {
    return readEvidence(...this.logs('producer', this.#producerCount, 'log'));
  }

  /** Sends that failed for good, from the producers' failure logs. */
  failedSends(): string[] {
    return readEvidence(...this.logs('producer', this.#producerCount, 'failed'));
  }

  /** One entry per successful handling, from the workers' logs. */
  handled(): string[] {
    return readEvidence(...this.logs('worker', this.#workerCount, 'log'));
  }

  /**
   * Every handler run the workers recorded (with `holds` in the workload),
   * each under the lease the workers were given (ended sooner where the run
   * saw `ctx.leaseExpired()`), for {@link findOverlaps};
   * its `messageId` is the message id and the delayed attempt (`m-7#d1`: the
   * copy a first delayed retry made), its holder the worker and the delivery
   * count (`worker-2 delivery 3`), which `deliveryCount` has as a number.
   */
  holds(): CountedHold[] {
    const leaseMs = this.adapter.leaseMs ?? WORKER_LEASE_MS;
    return this.logs('worker', this.#workerCount, 'holds').flatMap((path, i) =>
      readEvidence(path).map((line) => {
        const [messageId, delayedAttempt, deliveryCount, start, end, lost] = line.split(' ');
        const startedAt = Number(start);
        const leaseLostAt = lost === undefined || lost === '-' ? Infinity : Number(lost);
        return {
          messageId: `${messageId}#d${delayedAttempt}`,
          holder: `worker-${i + 1} delivery ${deliveryCount}`,
          deliveryCount: Number(deliveryCount),
          startedAt,
          endedAt: Number(end),
          leaseEndsAt: Math.min(startedAt + leaseMs, leaseLostAt),
        };
      }),
    );
  }

  /** Distinct ids handled so far. */
  handledCount(): number {
    return new Set(this.handled()).size;
  }

  /** Marks the end of a fault: recovery is counted from the last one. */
  faultDone(what: string): void {
    this.lastFaultAt = Date.now();
    this.log(`  fault: ${what}`);
  }

  /** Logs a progress line. */
  debug(line: string): void {
    this.log(`  ${line}`);
  }

  /** Notes something the report row should say. */
  note(text: string): void {
    this.notes.push(text);
    this.log(`  note: ${text}`);
  }

  /** Kills the broker with SIGKILL and brings it back; without a broker process, kills and restarts the workers. */
  brokerKill(): Promise<void> {
    return this.#brokerFault('kill');
  }

  /** Restarts the broker gracefully; without a broker process, stops the workers with SIGTERM and starts them again. */
  brokerRestart(): Promise<void> {
    return this.#brokerFault('restart');
  }

  async #brokerFault(kind: 'kill' | 'restart'): Promise<void> {
    const onBroker = kind === 'kill' ? this.adapter.killBroker : this.adapter.restartBroker;
    if (onBroker) {
      await onBroker.call(this.adapter, this.scope);
      this.faultDone(kind === 'kill' ? 'broker killed -9 and started again' : 'broker restarted gracefully');
      return;
    }
    const count = this.workers.filter((w) => w.running).length;
    await (kind === 'kill' ? this.killWorkers() : this.stopWorkers());
    for (let i = 0; i < count; i++) await this.startWorker();
    this.faultDone(`worker (the store's only process) ${kind === 'kill' ? 'killed -9' : 'stopped with SIGTERM'} and started again`);
  }

  /** Polls `check` every `intervalMs` (default 100) until it holds; rejects after `timeoutMs`. */
  async waitUntil(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>, intervalMs = 100): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await check()) return;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }

  #place(role: string): ((argv: readonly string[]) => string[]) | undefined {
    const { scope } = this;
    return scope.place ? (argv) => scope.place!(role, argv) : undefined;
  }

  private logs(role: string, count: number, extension: string): string[] {
    return Array.from({ length: count }, (_, i) => join(this.dir, `${role}-${i + 1}.${extension}`));
  }
}

function fileIncludes(path: string, text: string): boolean {
  return existsSync(path) && readFileSync(path, 'utf8').includes(text);
}
