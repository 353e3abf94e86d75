import { InvalidArgumentError, Option, type Command } from 'commander';
import { OptionError } from '../../util/option-checks.js';
import { formatDuration } from '../../planning/duration-text.js';
import { outageChart, outageChartTitle } from '../../simulation/outage-chart.js';
import {
  checkOutageSetting,
  OUTAGE_SETTINGS,
  simulateOutage,
  type OutageResult,
  type OutageScenario,
  type OutageSetting,
  type OutageSettingName,
} from '../../simulation/outage.js';
import { addChartOptions, deliverChart, type ChartFlags } from '../chart-output.js';
import { table } from '../format.js';
import { UsageError } from '../open-transport.js';
import { addPolicyOptions, durationFlag, policyInput, type PolicyFlags } from '../policy-options.js';
import { ioOf } from '../program.js';
import { write } from '../session.js';

interface OutageFlags extends PolicyFlags, ChartFlags {
  capacity: number;
  load: number;
  warmup: number;
  outage: number;
  after: number;
  setting?: OutageSettingName[];
  seed: number;
  json?: boolean;
}

/** The name of the setting a policy module or the policy flags describe. */
const YOURS = 'yours';
/** The endpoint concurrency when neither `--concurrency` nor the module sets one. */
const DEFAULT_CONCURRENCY = 8;
const SETTING_NAMES = Object.keys(OUTAGE_SETTINGS) as OutageSettingName[];
/** The policy flags that make a setting of their own (`--concurrency` is the scenario's, `--lease` means nothing to the memory transport). */
const POLICY_FLAGS = ['immediate', 'delayed', 'backoff', 'maxDelay', 'consumerBackoff', 'rateLimit', 'rateLimitWait', 'retryBudget'] as const;

/** One setting's figures, as the table and `--json` show them. */
interface OutageRow {
  setting: string;
  peakLoadRatio: number;
  meanLoadRatio: number;
  deadLettered: number;
  drainSeconds: number;
  idealDrainSeconds: number;
  handled: number;
  sent: number;
  callsPerSecond: number[];
}

/** `redeliver simulate outage [module]`: a downstream outage, per recoverability and flow-control setting. */
export function registerSimulateOutage(simulate: Command): void {
  const command = simulate
    .command('outage')
    .summary('a downstream outage: its load, the backlog drain and the dead-lettered messages per flow-control setting')
    .description(
      'A downstream serving a fixed number of calls per second gets a steady load, fails every call for the outage, then recovers while the load goes on. ' +
        'A real endpoint consumes the load in simulated time (memory transport, seeded random source) once per setting. ' +
        `Reports the downstream's peak and mean load during the outage relative to normal, the messages dead-lettered, and the time to drain the backlog. ` +
        `Settings: ${SETTING_NAMES.join(', ')}; a policy module or policy flags add the setting "${YOURS}", compared with "none"`,
    )
    .argument('[module]', 'a policy module: a .ts, .mts, .js or .mjs file exporting the options object an Endpoint takes')
    .option('--capacity <calls>', 'calls per second the downstream serves', positiveNumber, 100)
    .option('--load <share>', 'steady load as a share of capacity, between 0 and 1', loadShare, 0.8)
    .addOption(new Option('--warmup <duration>', 'normal running before the outage, whole seconds').argParser(wholeSeconds(0)).default(30, '30s'))
    .addOption(new Option('--outage <duration>', 'how long the downstream is down, whole seconds').argParser(wholeSeconds(1)).default(90, '90s'))
    .addOption(new Option('--after <duration>', 'how long the load goes on after the outage, whole seconds').argParser(wholeSeconds(0)).default(900, '15m'))
    .addOption(
      new Option(
        '--setting <list>',
        `built-in settings to compare, comma-separated: ${SETTING_NAMES.join(', ')} (default: all of them, or "none" next to a policy module or flags)`,
      ).argParser(settingList),
    )
    .option('--seed <number>', "seed of the endpoint's random source (jitter)", seedNumber, 11);
  addPolicyOptions(command);
  // Two policy flags mean something else here.
  redescribe(command, '--concurrency', `messages the endpoint handles at once, in every setting (default ${DEFAULT_CONCURRENCY})`);
  redescribe(command, '--lease', 'no effect: the simulated transport does not lease');
  command.option('--json', 'print JSON for scripts');
  addChartOptions(command, "a chart of the downstream's calls per second over time, one line per setting")
    .action(async (moduleFile: string | undefined, opts: OutageFlags, cmd: Command) => {
      const io = ioOf(cmd);
      const policy = await policyInput(moduleFile, opts);
      const scenario: OutageScenario = {
        capacityPerSec: opts.capacity,
        loadShare: opts.load,
        warmupSec: opts.warmup,
        outageSec: opts.outage,
        afterSec: opts.after,
        concurrency: policy.concurrency ?? DEFAULT_CONCURRENCY,
        seed: opts.seed,
      };
      if (!(Number.isInteger(scenario.concurrency) && scenario.concurrency >= 1)) throw new UsageError(`concurrency must be a whole number of at least 1, not ${scenario.concurrency}`);
      const settings: [string, OutageSetting][] = [];
      const yours = moduleFile !== undefined || POLICY_FLAGS.some((flag) => opts[flag] !== undefined);
      for (const name of opts.setting ?? (yours ? ['none'] : SETTING_NAMES)) settings.push([name, OUTAGE_SETTINGS[name as OutageSettingName]]);
      if (yours) {
        const setting: OutageSetting = { recoverability: policy.recoverability, flowControl: policy.flowControl };
        try {
          checkOutageSetting(setting);
        } catch (error) {
          if (error instanceof OptionError) throw new UsageError(`the policy cannot run: ${error.message}`);
          throw error;
        }
        settings.push([YOURS, setting]);
      }

      const rows: OutageRow[] = [];
      for (const [i, [name, setting]] of settings.entries()) {
        if (io.stderr.isTTY) io.stderr.write(`\rsimulating ${name} (${i + 1}/${settings.length})\u001b[K`);
        rows.push(outageRow(name, await simulateOutage(scenario, setting)));
      }
      if (io.stderr.isTTY) io.stderr.write('\r\u001b[2K');

      const chartLines = await deliverChart(
        outageChartTitle(scenario),
        () => outageChart(scenario, rows.map((row) => ({ setting: row.setting, callsPerSecond: row.callsPerSecond }))),
        opts,
        io,
      );
      if (opts.json) {
        await write(io.stdout, `${compactNumberArrays(JSON.stringify({ scenario, rows }, null, 2))}\n`);
        for (const line of chartLines) await write(io.stderr, `${line}\n`);
        return;
      }
      const lines = [
        describeScenario(scenario),
        '',
        ...table(
          [
            { title: 'SETTING' },
            { title: 'PEAK LOAD', align: 'right' },
            { title: 'MEAN LOAD', align: 'right' },
            { title: 'DEAD-LETTERED', align: 'right' },
            { title: 'DRAIN', align: 'right' },
            { title: 'IDEAL DRAIN', align: 'right' },
            { title: 'HANDLED', align: 'right' },
            { title: 'SENT', align: 'right' },
          ],
          rows.map((row) => [
            row.setting,
            `${row.peakLoadRatio}×`,
            `${row.meanLoadRatio}×`,
            whole(row.deadLettered),
            `${row.drainSeconds} s`,
            `${row.idealDrainSeconds} s`,
            whole(row.handled),
            whole(row.sent),
          ]),
        ),
        '',
        `Peak load: the highest mean calls per second over any ${Math.min(5, scenario.outageSec)} s of the outage, over the normal load; mean load: over the whole outage.`,
        'Drain: from recovery until the backlog is gone; ideal: the backlog over the spare capacity.',
      ];
      if (settings.some(([name]) => name !== YOURS)) lines.push(`Built-in settings use the endpoint's default recoverability; ${describeSettings(settings.map(([name]) => name))}.`);
      if (chartLines.length > 0) lines.push('', ...chartLines);
      await write(io.stdout, `${lines.join('\n')}\n`);
    });
}

function redescribe(command: Command, flag: string, description: string): void {
  const option = command.options.find((o) => o.long === flag);
  if (option) option.description = description;
}

function outageRow(setting: string, result: OutageResult): OutageRow {
  return {
    setting,
    peakLoadRatio: round(result.peakLoadRatio, 2),
    meanLoadRatio: round(result.meanLoadRatio, 2),
    deadLettered: result.deadLettered,
    drainSeconds: round(result.drainSeconds, 1),
    idealDrainSeconds: round(result.idealDrainSeconds, 1),
    handled: result.handled,
    sent: result.sent,
    callsPerSecond: result.perSecond.calls,
  };
}

function describeScenario(s: OutageScenario): string {
  const normal = s.capacityPerSec * s.loadShare;
  const outageTo = s.warmupSec + s.outageSec;
  return (
    `Downstream capacity ${number(s.capacityPerSec)} calls/s, load ${number(normal)} messages/s (${number(s.loadShare * 100)} %), ` +
    `down from ${s.warmupSec} s to ${outageTo} s (${formatDuration(s.outageSec * 1000)}), load until ${outageTo + s.afterSec} s; ` +
    `concurrency ${s.concurrency}, seed ${s.seed}. Simulated time, memory transport.`
  );
}

const SETTING_TEXT: Record<OutageSettingName, string> = {
  none: 'none: no flow control',
  consumerBackoff: 'consumerBackoff: NSQ consumer backoff',
  rateLimit: 'rateLimit: rate limiting after 20 consecutive failures, 1 s between attempts',
  retryBudget: 'retryBudget: the retry budget',
  combined: 'combined: all three',
};

function describeSettings(names: readonly string[]): string {
  return names.filter((name): name is OutageSettingName => name in SETTING_TEXT).map((name) => SETTING_TEXT[name]).join('; ');
}

/** Pretty JSON with each array of numbers on one line: the per-second series stay readable. */
function compactNumberArrays(json: string): string {
  return json.replace(/\[\s*(-?[\d.e+-]+(?:,\s*-?[\d.e+-]+)*)\s*\]/g, (_, items: string) => `[${items.replace(/\s+/g, '')}]`);
}

function round(n: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(n * factor) / factor;
}

function whole(n: number): string {
  return n.toLocaleString('en-US');
}

function number(n: number): string {
  return String(Number(n.toPrecision(6)));
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number above 0');
  return n;
}

function loadShare(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n > 0 && n < 1)) throw new InvalidArgumentError('expected a share of the capacity between 0 and 1, exclusive (such as 0.8)');
  return n;
}

function wholeSeconds(min: number): (value: string) => number {
  return (value) => {
    const ms = durationFlag(value);
    if (ms % 1000 !== 0 || ms < min * 1000) throw new InvalidArgumentError(`expected whole seconds, at least ${min} (such as 90s, 15m)`);
    return ms / 1000;
  };
}

function settingList(value: string, previous: OutageSettingName[] | undefined): OutageSettingName[] {
  const items = value.split(',').map((item) => item.trim());
  for (const item of items) {
    if (!(SETTING_NAMES as string[]).includes(item)) throw new InvalidArgumentError(`unknown setting ${JSON.stringify(item)}: expected ${SETTING_NAMES.join(', ')}, comma-separated`);
  }
  return [...new Set([...(previous ?? []), ...(items as OutageSettingName[])])];
}

function seedNumber(value: string): number {
  const n = Number(value);
  if (!/^\s*-?\d+\s*$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected a whole number');
  return n;
}
