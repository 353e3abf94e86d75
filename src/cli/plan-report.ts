import type { Conflict, PlanTarget } from '../planning/conflicts.js';
import { formatDuration } from '../planning/duration-text.js';
import type { PolicyPlan } from '../planning/plan.js';
import { renderSvgChart } from '../planning/svg-chart.js';
import { plural, table } from './format.js';

/** Rows of the schedule shown in full; a longer one shows its start and end. */
const SHOWN_ROWS = 60;

/** The plan as one JSON-ready object: the fields scripts read first, then the details. */
export function planReport(plan: PolicyPlan, conflicts: readonly Conflict[], notes: readonly string[]): Record<string, unknown> {
  return {
    attempts: plan.attempts.max,
    longestToErrorQueueMs: round(plan.toErrorQueueMs.p100),
    schedule: plan.schedule.map((a) => ({
      attempt: a.attempt,
      kind: a.kind,
      delayMs: round(a.delayMs.p50),
      elapsedP50Ms: round(a.elapsedMs.p50),
      elapsedP99Ms: round(a.elapsedMs.p99),
      round: a.round,
      reached: a.reached,
      delayP0Ms: round(a.delayMs.p0),
      delayP100Ms: round(a.delayMs.p100),
      elapsedP0Ms: round(a.elapsedMs.p0),
      elapsedP100Ms: round(a.elapsedMs.p100),
    })),
    conflicts: conflicts.map((c) => ({ what: c.what, fix: c.fix, id: c.id, transport: c.transport ?? null })),
    minAttempts: plan.attempts.min,
    outcome: plan.outcome,
    reason: plan.reason ?? null,
    toErrorQueueMs: mapSpread(plan.toErrorQueueMs),
    deadlineMs: plan.deadlineMs ?? null,
    cap: { maxDelayMs: plan.maxDelayMs, cappedDelays: plan.cap.cappedDelays, cappedDraws: plan.cap.cappedDraws, uncappedLongestMs: round(plan.cap.uncappedLongestMs) },
    handler: plan.handler ?? null,
    notes,
    draws: plan.draws,
    seed: plan.seed,
  };
}

/** The plan as text: the schedule table, the totals, handler time, then conflicts and notes. */
export function planText(plan: PolicyPlan, conflicts: readonly Conflict[], notes: readonly string[], targets: readonly PlanTarget[]): string {
  const lines: string[] = [];
  lines.push(`Retry schedule of a message whose every attempt fails (${plural(plan.draws, 'seeded draw')}, seed ${plan.seed})`, '');
  const rows = plan.schedule.map((a) => [
    String(a.attempt),
    a.kind,
    String(a.round),
    range(a.delayMs.p0, a.delayMs.p100),
    formatDuration(a.elapsedMs.p0),
    formatDuration(a.elapsedMs.p50),
    formatDuration(a.elapsedMs.p99),
    formatDuration(a.elapsedMs.p100),
  ]);
  const shown = rows.length <= SHOWN_ROWS ? rows : [...rows.slice(0, SHOWN_ROWS - 10), ['…', '', '', '', '', '', '', ''], ...rows.slice(-10)];
  lines.push(
    ...table(
      [
        { title: 'ATTEMPT', align: 'right' },
        { title: 'KIND' },
        { title: 'ROUND', align: 'right' },
        { title: 'DELAY BEFORE', align: 'right' },
        { title: 'ELAPSED P0', align: 'right' },
        { title: 'P50', align: 'right' },
        { title: 'P99', align: 'right' },
        { title: 'P100', align: 'right' },
      ],
      shown,
    ),
    '',
  );
  const rounds = (plan.schedule[plan.schedule.length - 1]?.round ?? 0) + 1;
  const attempts = plan.attempts.min === plan.attempts.max ? String(plan.attempts.max) : `${plan.attempts.min} to ${plan.attempts.max} (the backoff stops on elapsed time)`;
  lines.push(`Attempts: ${attempts}, in ${plural(rounds, 'round')} (the first, then one per delayed retry)`);
  const end = plan.outcome === 'never' ? 'Never reaches the error queue' : plan.outcome === 'discarded' ? 'Discarded by the policy after' : `Error queue (${plan.reason}) after`;
  if (plan.outcome !== 'never') {
    lines.push(`${end}: p50 ${formatDuration(plan.toErrorQueueMs.p50)}, p99 ${formatDuration(plan.toErrorQueueMs.p99)}, longest ${formatDuration(plan.toErrorQueueMs.p100)}`);
  } else lines.push(`${end}: still retrying after ${plan.attempts.max.toLocaleString('en-US')} attempts`);
  lines.push(
    plan.cap.cappedDelays === 0
      ? `Delay cap ${formatDuration(plan.maxDelayMs)}: no delay reaches it`
      : `Delay cap ${formatDuration(plan.maxDelayMs)}: ${plural(plan.cap.cappedDelays, 'delay')} cut in ${plan.cap.cappedDraws} of ${plan.draws} draws; without the cap the longest time to the error queue would be ${formatDuration(plan.cap.uncappedLongestMs)}`,
  );
  if (plan.deadlineMs !== undefined) {
    lines.push(`Deadline ${formatDuration(plan.deadlineMs)} after the first attempt: no retry is scheduled to come back at or after it`);
  }
  const h = plan.handler;
  if (h) {
    lines.push(
      `Handler time ${formatDuration(h.handlerMs)}: one delivery is held up to ${formatDuration(h.holdPerDeliveryMs)} (a round), a failing message takes ${formatDuration(h.workerTimePerMessageMs)} of worker time`,
    );
    if (h.queue) {
      lines.push(
        `A queue of ${h.queue.messages.toLocaleString('en-US')} failing messages on ${plural(h.queue.concurrency, 'worker')}: their first round keeps every worker busy for ${formatDuration(h.queue.firstRoundMs)}, all rounds take ${formatDuration(h.queue.allRoundsMs)} of it`,
      );
    }
  }
  lines.push('');
  const checked = targets.map(targetName).join(', ');
  if (conflicts.length === 0) lines.push(`No conflicts with ${checked}`);
  else {
    lines.push(`Conflicts (${conflicts.length}), checked against ${checked}:`);
    for (const c of conflicts) lines.push(`  - ${c.transport ?? 'runtime'} ${c.id}: ${c.what}`, `    fix: ${c.fix}`);
  }
  for (const note of notes) lines.push(`Note: ${note}`);
  return `${lines.join('\n')}\n`;
}

/** The chart: time from the first attempt to each attempt, at p0, p50, p99 and p100 of the draws. */
export function planChart(plan: PolicyPlan, title: string): string {
  const series = (name: string, pick: (a: PolicyPlan['schedule'][number]) => number) => ({
    name,
    points: plan.schedule.map((a) => ({ x: a.attempt, y: pick(a) / scale.ms })),
  });
  const longest = plan.schedule[plan.schedule.length - 1]?.elapsedMs.p100 ?? 0;
  const scale = longest >= 2 * 3_600_000 ? { ms: 3_600_000, unit: 'hours' } : longest >= 2 * 60_000 ? { ms: 60_000, unit: 'minutes' } : { ms: 1_000, unit: 'seconds' };
  return renderSvgChart(
    [
      {
        title: `When each attempt runs (${plan.draws} draws)`,
        xLabel: 'attempt',
        yLabel: `${scale.unit} since the first attempt`,
        series: [series('p0', (a) => a.elapsedMs.p0), series('p50', (a) => a.elapsedMs.p50), series('p99', (a) => a.elapsedMs.p99), series('p100', (a) => a.elapsedMs.p100)],
      },
    ],
    { title, panelWidth: 640 },
  );
}

function targetName(target: PlanTarget): string {
  if (target.transport !== 'rabbitmq') return target.transport;
  return `rabbitmq (${target.queueType ?? 'classic'} queues, RabbitMQ ${target.brokerMajor ?? 4})`;
}

function range(low: number, high: number): string {
  return low === high ? formatDuration(low) : `${formatDuration(low)} to ${formatDuration(high)}`;
}

function mapSpread(s: PolicyPlan['toErrorQueueMs']): Record<string, number> {
  return { p0: round(s.p0), p50: round(s.p50), p99: round(s.p99), p100: round(s.p100) };
}

function round(n: number): number {
  return Math.round(n);
}
