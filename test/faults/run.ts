/**
 * Runs one scenario on one adapter: starts its processes and fault, lets the
 * run drain, stops the workers, and counts the durable evidence with the
 * checker.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FaultAdapter } from './adapters/types.js';
import { account, type Accounting } from './checker.js';
import { ScenarioContext } from './context.js';
import { DEFAULT_MIX } from './failure-mix.js';
import type { Scenario } from './scenarios.js';

/** One row of the fault table. */
export interface ScenarioResult {
  readonly name: string;
  readonly transport: string;
  readonly messages: number;
  readonly lost: number;
  readonly duplicates: number;
  /** Seconds from the end of the last fault until everything drained; null when it never did. */
  readonly recoverySeconds: number | null;
  readonly handled?: number;
  readonly errored?: number;
  readonly pending?: number;
  /** Up to 10 lost ids, for diagnosis. */
  readonly lostSample?: readonly string[];
  /** Why the scenario did not run on this transport. */
  readonly skipped?: string;
  readonly notes?: readonly string[];
}

/** Options of {@link runScenario}. */
export interface RunOptions {
  /** Base message count. */
  readonly messages: number;
  /** Directory for this run's logs and files. */
  readonly dir: string;
  /** Seed of the failure mix. */
  readonly seed: number;
  /** How long to wait for the drain after the last fault. Default 120 s. */
  readonly drainTimeoutMs?: number;
  readonly log: (line: string) => void;
}

let runCounter = 0;

/** Runs `scenario` on `adapter` (already started) and resolves its row. */
export async function runScenario(adapter: FaultAdapter, scenario: Scenario, options: RunOptions): Promise<ScenarioResult> {
  const skipped = adapter.skipReason(scenario.name);
  if (skipped) return { name: scenario.name, transport: adapter.transport, messages: 0, lost: 0, duplicates: 0, recoverySeconds: null, skipped };

  const label = `f${process.pid}-${++runCounter}-${scenario.name}`;
  const dir = join(options.dir, `${adapter.transport}-${scenario.name}`);
  mkdirSync(dir, { recursive: true });
  const scope = await adapter.scope(label, dir, scenario.scopeOptions);
  const workload = scenario.workload(options.messages);
  const context = new ScenarioContext(
    adapter,
    scope,
    dir,
    { mix: DEFAULT_MIX, delayStepMs: 500, ...workload },
    options.seed,
    options.log,
  );
  options.log(`${adapter.transport} ${scenario.name}: ${scenario.title} (${workload.messages} messages, evidence in ${dir})`);
  try {
    try {
      await scenario.run(context);
    } catch (error) {
      context.note(`scenario stopped early: ${(error as Error).message}`);
    }
    context.lastFaultAt ??= Date.now();
    await Promise.all(context.producers.map((p) => p.exited));
    const recoverySeconds = await drain(context, scenario, options.drainTimeoutMs ?? 120_000);
    await context.stopWorkers();
    const failedSends = context.failedSends().length;
    if (failedSends > 0) context.note(`${failedSends} sends failed for good (not confirmed, not counted)`);
    const result = account({
      confirmed: context.confirmed(),
      handled: context.handled(),
      errored: await scope.errorIds().catch((error: Error) => {
        context.note(`error queue unreadable: ${error.message}`);
        return [];
      }),
      pending: await scope.pendingIds(),
    });
    return row(scenario, adapter, result, recoverySeconds, context.notes);
  } finally {
    await context.killWorkers();
    await Promise.all(context.producers.map((p) => p.kill9()));
    await scope.cleanup().catch(() => undefined);
  }
}

/** Waits for the run to drain; resolves the seconds since the last fault, or null on timeout. */
async function drain(context: ScenarioContext, scenario: Scenario, timeoutMs: number): Promise<number | null> {
  const confirmed = new Set(context.confirmed());
  const drained =
    scenario.drained?.bind(scenario) ??
    (async (c: ScenarioContext, ids: ReadonlySet<string>) => {
      const handled = new Set(c.handled());
      const open = [...ids].filter((id) => !handled.has(id)).length;
      return open === 0 || open <= (await c.scope.errorCount().catch(() => -1));
    });
  try {
    await context.waitUntil('the drain', timeoutMs, () => drained(context, confirmed));
  } catch {
    context.note(`did not drain within ${timeoutMs / 1000} s of the last fault`);
    return null;
  }
  return Math.round((Date.now() - context.lastFaultAt!) / 100) / 10;
}

function row(scenario: Scenario, adapter: FaultAdapter, result: Accounting, recoverySeconds: number | null, notes: string[]): ScenarioResult {
  return {
    name: scenario.name,
    transport: adapter.transport,
    messages: result.messages,
    lost: result.lost.length,
    duplicates: result.duplicates,
    recoverySeconds,
    handled: result.handled,
    errored: result.errored,
    pending: result.pending,
    lostSample: result.lost.slice(0, 10),
    notes,
  };
}
