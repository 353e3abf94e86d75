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
import { behaviourOf, DEFAULT_MIX } from './failure-mix.js';
import { describeVerdict, judgeHolders } from './holders.js';
import { settlementFailures } from './settlement-rate.js';
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
  /** Lost ids by what their handler did (see failure-mix.ts): tells a lost first delivery from a lost retry or error-queue copy. */
  readonly lostByBehaviour?: Readonly<Record<string, number>>;
  /** The broker's bare client beside redeliver in the same run (see `FaultAdapter.bareScope`): its confirmed messages, losses and duplicates. */
  readonly bareMessages?: number;
  readonly bareLost?: number;
  readonly bareDuplicates?: number;
  /**
   * Deliveries of one copy of a message (same delayed attempt) that started
   * while another delivery of it was held under a live lease, with a higher
   * delivery count, or an older delivery taken as fresh after a newer one
   * started (`staleOverlaps`, counted in): two holders at once that the
   * client's lease should have prevented (recorded with `holds` in the
   * workload; see holders.ts). A failure.
   */
  readonly overlaps?: number;
  readonly staleOverlaps?: number;
  /** Two holders at once where the later delivery's count is not higher and was given out before: the broker gave one delivery out twice. */
  readonly brokerOverlaps?: number;
  /** Holds of a delayed retry's copy beside a hold of the copy it replaced (redelivered: its ack was lost), counted apart. */
  readonly copyOverlaps?: number;
  /** The bare client's `overlaps` and `brokerOverlaps`, where it ran beside redeliver with holds recorded. */
  readonly bareOverlaps?: number;
  readonly bareBrokerOverlaps?: number;
  /** Why the scenario did not run on this transport. */
  readonly skipped?: string;
  /** A failover row's set-up (`sentinel`, `cluster`) and the `waitReplicas` its processes used. */
  readonly setup?: string;
  readonly waitReplicas?: number;
  /** Why the scenario stopped before its fault ran as designed (a child that exited at start, a step that threw). A failure. */
  readonly stoppedEarly?: string;
  readonly notes?: readonly string[];
}

/**
 * Why a row fails, or undefined when it passes: redeliver lost more than
 * the broker's bare client beside it (where there is one; a failover
 * without `waitReplicas` may lose what asynchronous replication had not
 * copied yet: measured, not a failure), held a message twice at once
 * (where no bare client recorded its holds beside it; where one did,
 * {@link holdsFailure} compares the two over the run), or did not run its
 * scenario through. A row that gave up with messages still pending is
 * {@link rowStall}: reported, not yet a failure.
 */
export function rowFailure(result: ScenarioResult): string | undefined {
  if (result.skipped !== undefined) return undefined;
  if (result.lost > (result.bareLost ?? 0) && result.waitReplicas !== 0) return `lost ${result.lost}`;
  if (result.bareOverlaps === undefined && (result.overlaps ?? 0) > 0) return `two holders ${result.overlaps}`;
  if (result.stoppedEarly !== undefined) return `stopped early: ${result.stoppedEarly}`;
  return undefined;
}

/**
 * Where a bare client recorded its holds beside redeliver's (the partition
 * rows of JetStream and RabbitMQ), why the rows of one cluster fail
 * together, or undefined: redeliver held messages in two handlers at once
 * (early or stale) more often, over all of them, than the bare client did,
 * by more than chance explains. There such holds are the broker's: it
 * gives a message to another worker without a word to the one that holds
 * it (a RabbitMQ quorum queue that lost sight of its consumer's node,
 * nats-server giving a message out again within `ack_wait` across a cut),
 * to either client, a few times a run, so one row's count, and a run's
 * small totals, are chance. The test is a one-sided sign test: with each
 * such hold as likely redeliver's as the bare client's, the chance of
 * redeliver having at least its count of the two's total must be 1 % or
 * more (so 7 against 0 fails, 6 against 0 does not; 4 against 2 does not).
 */
export function holdsFailure(results: readonly ScenarioResult[]): string | undefined {
  const totals = pairedHolds(results);
  if (!totals || totals.ours <= totals.bare) return undefined;
  const chance = atLeastByChance(totals.ours, totals.ours + totals.bare);
  if (chance >= HOLDS_SIGNIFICANCE) return undefined;
  return `two holders ${totals.ours} over ${totals.rows} rows, the bare client ${totals.bare} (as likely by chance: ${(chance * 100).toPrecision(2)} %)`;
}

/** Below this chance, redeliver's excess of two holders over the bare client's fails the run ({@link holdsFailure}). */
const HOLDS_SIGNIFICANCE = 0.01;

/** The chance of at least `k` heads in `n` fair coin tosses, summed in log space so a large `n` neither overflows nor underflows. */
export function atLeastByChance(k: number, n: number): number {
  let logPmf = -n * Math.LN2;
  let tail = 0;
  for (let i = 0; i <= n; i++) {
    if (i > 0) logPmf += Math.log((n - i + 1) / i);
    if (i >= k) tail += Math.exp(logPmf);
  }
  return Math.min(1, tail);
}

/** The early and stale holds of redeliver (`ours`) and of the bare client, summed over the rows that ran with both recording them; undefined when none did. */
export function pairedHolds(results: readonly ScenarioResult[]): { rows: number; ours: number; bare: number } | undefined {
  const paired = results.filter((r) => r.skipped === undefined && r.bareOverlaps !== undefined);
  if (paired.length === 0) return undefined;
  return { rows: paired.length, ours: paired.reduce((sum, r) => sum + (r.overlaps ?? 0), 0), bare: paired.reduce((sum, r) => sum + (r.bareOverlaps ?? 0), 0) };
}

/**
 * A row that gave up (stalled, or did not drain in time) with messages still
 * pending that nothing handled: nothing lost, but a stall. Reported on its
 * own line; not a failure yet, while two such stalls are open
 * (docs/fault-suite.md, "Stalls reported").
 */
export function rowStall(result: ScenarioResult): string | undefined {
  if (result.skipped !== undefined || result.recoverySeconds !== null || (result.pending ?? 0) === 0) return undefined;
  return `${result.pending} messages left pending, never handled`;
}

/** Options of {@link runScenario}. */
export interface RunOptions {
  /** Base message count. */
  readonly messages: number;
  /** Directory for this run's logs and files. */
  readonly dir: string;
  /** Seed of the failure mix. */
  readonly seed: number;
  /**
   * How long to wait for the drain after the last fault. Default 300 s: a
   * RabbitMQ quorum delay level retries a hop left unconfirmed by a broker
   * fault after 180 s (`dead_letter_worker_publisher_confirm_timeout`).
   */
  readonly drainTimeoutMs?: number;
  /** Stop waiting for the drain when nothing was handled or dead-lettered for this long. Default 200 s (past that 180 s hop retry). */
  readonly stallMs?: number;
  readonly log: (line: string) => void;
}

let runCounter = 0;

/** Why `scenario` does not run on `adapter`: the scenario's own transport list, then the adapter's reason, then the scenario's when the adapter lacks the fault it needs. */
export function skipReasonOf(adapter: FaultAdapter, scenario: Scenario): string | undefined {
  if (scenario.only && !scenario.only.includes(adapter.transport)) return `a scenario of ${scenario.only.join(', ')} only`;
  const reason = adapter.skipReason(scenario.name);
  if (reason) return reason;
  if (scenario.needs && adapter[scenario.needs] === undefined) return scenario.absentReason ?? `the transport has no ${scenario.needs}`;
  return undefined;
}

/** Runs `scenario` on `adapter` (already started) and resolves its row. */
export async function runScenario(adapter: FaultAdapter, scenario: Scenario, options: RunOptions): Promise<ScenarioResult> {
  const skipped = skipReasonOf(adapter, scenario);
  if (skipped) return { name: scenario.name, transport: adapter.transport, messages: 0, lost: 0, duplicates: 0, recoverySeconds: null, skipped };

  const label = `f${process.pid}-${++runCounter}-${scenario.name}`;
  const dir = join(options.dir, `${adapter.transport}-${scenario.name}`);
  mkdirSync(dir, { recursive: true });
  const scope = await adapter.scope(label, dir, scenario.scopeOptions);
  const bareDir = join(dir, 'bare');
  mkdirSync(bareDir, { recursive: true });
  const bareScope = await adapter.bareScope?.(scenario.name, `${label}-bare`, bareDir);
  const workload = scenario.workload(options.messages);
  const settings = { mix: DEFAULT_MIX, delayStepMs: 500, workMs: 10, holds: false, ...workload };
  const context = new ScenarioContext(adapter, scope, dir, settings, options.seed, options.log);
  const twin = bareScope && new ScenarioContext(adapter, bareScope, bareDir, settings, options.seed, (line) => options.log(`  bare client:${line}`));
  context.twin = twin;
  const stallMs = options.stallMs ?? adapter.stallMs ?? 200_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 300_000;
  options.log(`${adapter.transport} ${scenario.name}: ${scenario.title} (${workload.messages} messages${twin ? ', the bare client beside it' : ''}, evidence in ${dir})`);
  let stoppedEarly: string | undefined;
  try {
    try {
      await scenario.run(context);
    } catch (error) {
      stoppedEarly = String((error as Error | null)?.message ?? error);
      context.note(`scenario stopped early: ${stoppedEarly}`);
    }
    context.lastFaultAt ??= Date.now();
    if (twin) twin.lastFaultAt = context.lastFaultAt;
    await Promise.all([...context.producers, ...(twin?.producers ?? [])].map((p) => p.exited));
    const [recoverySeconds, bareRecoverySeconds] = await Promise.all([
      drain(context, scenario, drainTimeoutMs, stallMs),
      twin && drain(twin, { ...scenario, drained: undefined, drainWaitsForDelayed: false }, drainTimeoutMs, stallMs),
    ]);
    await context.stopWorkers();
    const result = await evidence(context, scenario);
    const early = stoppedEarly === undefined ? {} : { stoppedEarly };
    if (!twin) return { ...row(scenario, adapter, result, recoverySeconds, context), ...early, ...oneHolder(context) };
    const bare = await evidence(twin, scenario);
    context.note(`bare client: ${bare.lost.length} of ${bare.messages} lost, ${bare.duplicates} duplicates, recovery ${bareRecoverySeconds === null ? 'never' : `${bareRecoverySeconds} s`}${twin.notes.length > 0 ? ` (${twin.notes.join('; ')})` : ''}`);
    return { ...row(scenario, adapter, result, recoverySeconds, context), ...early, bareMessages: bare.messages, bareLost: bare.lost.length, bareDuplicates: bare.duplicates, ...oneHolder(context) };
  } finally {
    await context.killWorkers();
    await Promise.all([...context.producers, ...(twin?.producers ?? [])].map((p) => p.kill9()));
    await scope.cleanup().catch(() => undefined);
    await bareScope?.cleanup().catch(() => undefined);
  }
}

/**
 * The one-holder check, where the workers recorded their handler runs (see
 * holders.ts): two deliveries of one copy of a message at once, within the
 * earlier one's lease, with a raised delivery count or an older delivery
 * taken as fresh (`overlaps`) are a failure; one delivery count given out
 * twice (`brokerOverlaps`) is the broker's, reported beside the bare
 * client's figures; a hold of a delayed retry's copy beside the copy it
 * replaced is a duplicate the transport documents, counted apart. The bare
 * client's, where it ran with holds, alike. Also notes the settlements
 * refused because their lease had run out.
 */
function oneHolder(context: ScenarioContext): Pick<ScenarioResult, 'overlaps' | 'staleOverlaps' | 'brokerOverlaps' | 'copyOverlaps' | 'bareOverlaps' | 'bareBrokerOverlaps'> {
  if (!context.workload.holds) return {};
  const verdict = judgeHolders(context.holds());
  context.note(describeVerdict(verdict));
  const late = settlementFailures(context.workerOutputs()).gone;
  context.note(`${late} settlements came after their lease ran out and were refused (the delivery was gone)`);
  const row = { overlaps: verdict.early.length + verdict.stale.length, staleOverlaps: verdict.stale.length, brokerOverlaps: verdict.repeated.length, copyOverlaps: verdict.copies };
  const twin = context.twin;
  if (!twin) return row;
  const bare = judgeHolders(twin.holds());
  context.note(`bare client: ${describeVerdict(bare)}`);
  return { ...row, bareOverlaps: bare.early.length + bare.stale.length, bareBrokerOverlaps: bare.repeated.length };
}

/** Counts a context's durable evidence once its workers have stopped. */
async function evidence(context: ScenarioContext, scenario: Scenario): Promise<Accounting> {
  const { scope } = context;
  const failedSends = context.failedSends().length;
  if (failedSends > 0) context.note(`${failedSends} sends failed for good (not confirmed, not counted)`);
  const errored = await readEvidence(context, 'error queue', () => scope.errorIds());
  const twice = errored.length - new Set(errored).size;
  if (twice > 0) context.note(`the error queue holds ${twice} entries of a message already in it`);
  return account({
    confirmed: scenario.counted?.(context) ?? context.confirmed(),
    handled: context.handled(),
    errored,
    pending: await readEvidence(context, 'pending messages', () => scope.pendingIds()),
  });
}

/** Attempts at reading the evidence off the broker, 2 s apart: a cluster just healed may answer "temporarily unavailable" for a while. */
const EVIDENCE_READS = 10;

/** Reads ids off the broker, again after a failure; notes the last failure and resolves none when every attempt failed. */
async function readEvidence(context: ScenarioContext, what: string, read: () => Promise<string[]>): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= EVIDENCE_READS) {
        context.note(`${what} unreadable: ${(error as Error).message}`);
        return [];
      }
      context.debug(`${what} unreadable (attempt ${attempt} of ${EVIDENCE_READS}): ${(error as Error).message}`);
      await new Promise((r) => setTimeout(r, 2_000));
    }
  }
}

/** How long the drain waits without progress before it asks the scope to move on copies the broker holds (`Scope.unstick`). */
const UNSTICK_AFTER_MS = 60_000;

/**
 * Whether the ids still `open` (confirmed, not handled) are accounted for:
 * no more of them than the error queue's entries (`errorCount`) and the
 * copies parked for an operator; and, given the error queue's ids
 * (`errored`), each one in it but at most `parked` of them. A count alone
 * takes an entry the error queue holds twice for another message.
 */
export function openAccountedFor(open: readonly string[], errorCount: number, parked: number, errored?: ReadonlySet<string>): boolean {
  if (open.length === 0) return true;
  if (open.length > errorCount + parked) return false;
  return errored === undefined || open.filter((id) => !errored.has(id)).length <= parked;
}

/** The least time between two reads of the error queue's ids by the drain (`Scope.errorIdsNow`). */
const ERROR_IDS_EVERY_MS = 1_000;

/**
 * Waits for the run to drain; resolves the seconds since the last fault, or
 * null when it did not drain in time or stalled (no message handled or
 * dead-lettered for `stallMs`). By default drained means every confirmed id
 * handled, in the error queue, or set aside for an operator by design (see
 * `Scope.parkedCount`), and, where the scenario asks it
 * (`drainWaitsForDelayed`), no delayed retry waiting. The open ids are first compared with the error
 * queue's count; where the scope reads the error queue's ids while workers
 * run (`Scope.errorIdsNow`), each open id must then be among them (or the
 * rest covered by the parked count), so an entry the error queue holds
 * twice does not stand for a message still on its way.
 */
async function drain(context: ScenarioContext, scenario: Scenario, timeoutMs: number, stallMs: number): Promise<number | null> {
  const confirmed = new Set(scenario.counted?.(context) ?? context.confirmed());
  let idsReadAt = 0;
  const drained =
    scenario.drained?.bind(scenario) ??
    (async (c: ScenarioContext, ids: ReadonlySet<string>) => {
      const handled = new Set(c.handled());
      const open = [...ids].filter((id) => !handled.has(id));
      if (open.length === 0) return true;
      const parked = (await c.scope.parkedCount?.().catch(() => -1)) ?? 0;
      const errorCount = await c.scope.errorCount().catch(() => -1);
      if (!openAccountedFor(open, errorCount, parked)) return false;
      if (scenario.drainWaitsForDelayed && (await c.scope.delayedCount().catch(() => -1)) !== 0) return false;
      if (!c.scope.errorIdsNow) return true;
      if (Date.now() - idsReadAt < ERROR_IDS_EVERY_MS) return false;
      idsReadAt = Date.now();
      return openAccountedFor(open, errorCount, parked, new Set(await c.scope.errorIdsNow().catch(() => [])));
    });
  let progress = -1;
  let progressAt = Date.now();
  let unstuckAt = progressAt;
  let stalled = false;
  try {
    await context.waitUntil('the drain', timeoutMs, async () => {
      if (await drained(context, confirmed)) return true;
      const now = context.handled().length + (await context.scope.errorCount().catch(() => 0));
      if (now !== progress) [progress, progressAt] = [now, Date.now()];
      if (context.scope.unstick && Date.now() - Math.max(progressAt, unstuckAt) > UNSTICK_AFTER_MS) {
        unstuckAt = Date.now();
        const what = await context.scope.unstick().catch((error: unknown) => `could not move held copies on: ${String(error)}`);
        if (what !== undefined) context.note(`the broker held copies after ${Math.round((unstuckAt - progressAt) / 1000)} s without progress; as an operator would, the suite ${what}`);
      }
      return (stalled = Date.now() - progressAt > stallMs);
    });
  } catch {
    context.note(`did not drain within ${timeoutMs / 1000} s`);
    return null;
  }
  if (stalled) {
    context.note(`stalled: nothing handled or dead-lettered for ${stallMs / 1000} s`);
    return null;
  }
  return Math.round((Date.now() - context.lastFaultAt!) / 100) / 10;
}

function row(scenario: Scenario, adapter: FaultAdapter, result: Accounting, recoverySeconds: number | null, context: ScenarioContext): ScenarioResult {
  const lostByBehaviour: Record<string, number> = {};
  for (const id of result.lost) {
    const behaviour = behaviourOf(id, context.workload.mix, context.seed);
    lostByBehaviour[behaviour] = (lostByBehaviour[behaviour] ?? 0) + 1;
  }
  return {
    name: scenario.name,
    transport: adapter.transport,
    ...adapter.failoverSetup,
    messages: result.messages,
    lost: result.lost.length,
    duplicates: result.duplicates,
    recoverySeconds,
    handled: result.handled,
    errored: result.errored,
    pending: result.pending,
    lostSample: result.lost.slice(0, 10),
    lostByBehaviour,
    notes: context.notes,
  };
}
