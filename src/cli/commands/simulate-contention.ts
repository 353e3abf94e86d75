import { InvalidArgumentError, Option, type Command } from 'commander';
import { contentionChart } from '../../simulation/contention-chart.js';
import { CONTENTION_STRATEGIES, simulateContention, type ContentionRow, type ContentionStrategy } from '../../simulation/contention.js';
import { table } from '../format.js';
import { ioOf } from '../program.js';
import { write } from '../session.js';
import { addChartOptions, deliverChart, type ChartFlags } from '../chart-output.js';

interface ContentionFlags extends ChartFlags {
  clients: number[];
  runs: number;
  seed: number;
  strategy: ContentionStrategy[];
  baseMs: number;
  capMs: number;
  json?: boolean;
}

/** `redeliver simulate contention`: many clients writing one row, per backoff strategy. */
export function registerSimulateContention(simulate: Command): void {
  const command = simulate
    .command('contention')
    .summary('many clients writing one row: calls and completion time per backoff strategy')
    .description(
      'N clients read a row\'s version and write it back conditionally; a stale write fails and its client backs off before reading again ' +
        '(the AWS "Exponential Backoff And Jitter" study). Reports the mean calls the server receives and the time until every client has written, per strategy and N',
    )
    .addOption(new Option('--clients <list>', 'numbers of clients, comma-separated').argParser(clientList).default([10, 20, 50, 100], '10,20,50,100'))
    .option('--runs <count>', 'runs per strategy and number of clients', runCount, 100)
    .option('--seed <number>', 'seed of the random source (network delays and jitter)', seedNumber, 1)
    .addOption(
      new Option('--strategy <list>', `strategies, comma-separated: ${CONTENTION_STRATEGIES.join(', ')}`)
        .argParser(strategyList)
        .default([...CONTENTION_STRATEGIES], 'all of them'),
    )
    .option('--base-ms <ms>', 'base delay: retry n waits min(cap, base × 2^n) before jitter', milliseconds, 5)
    .option('--cap-ms <ms>', 'largest delay before a retry', milliseconds, 2_000)
    .option('--json', 'print JSON for scripts');
  addChartOptions(command, 'a chart of calls and completion time against the number of clients')
    .action(async (opts: ContentionFlags, command: Command) => {
      const io = ioOf(command);
      const { rows } = simulateContention({ strategies: opts.strategy, clients: opts.clients, runs: opts.runs, seed: opts.seed, baseMs: opts.baseMs, capMs: opts.capMs });
      const summary = `${opts.runs} runs per point, seed ${opts.seed}, base ${opts.baseMs} ms, cap ${opts.capMs} ms, network hop |Normal(10 ms, 2 ms)|`;
      const title = `Contention for one row (${summary})`;
      const chartLines = await deliverChart(title, () => contentionChart(rows, title), opts, io);
      if (opts.json) {
        await write(io.stdout, `${JSON.stringify({ rows: rows.map(jsonRow) }, null, 2)}\n`);
        for (const line of chartLines) await write(io.stderr, `${line}\n`);
        return;
      }
      const lines = [
        `Contention for one row: ${summary}.`,
        '',
        'Mean calls (reads + writes the server received)',
        ...matrix(rows, opts, (row) => Math.round(row.calls).toLocaleString('en-US')),
        '',
        'Mean completion time in ms (until the last client learned its write succeeded)',
        ...matrix(rows, opts, (row) => Math.round(row.completionMs).toLocaleString('en-US')),
      ];
      if (chartLines.length > 0) lines.push('', ...chartLines);
      await write(io.stdout, `${lines.join('\n')}\n`);
    });
}

/** A row as `--json` prints it: calls and writes to 0.1, milliseconds to 0.1. */
function jsonRow(row: ContentionRow): ContentionRow {
  return { strategy: row.strategy, clients: row.clients, calls: round1(row.calls), writes: round1(row.writes), completionMs: round1(row.completionMs) };
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

/** One line per strategy, one column per number of clients. */
function matrix(rows: readonly ContentionRow[], opts: ContentionFlags, cell: (row: ContentionRow) => string): string[] {
  const columns = [{ title: 'STRATEGY' }, ...opts.clients.map((n) => ({ title: `N=${n}`, align: 'right' as const }))];
  const lines = opts.strategy.map((strategy) => [
    strategy,
    ...opts.clients.map((clients) => {
      const row = rows.find((r) => r.strategy === strategy && r.clients === clients);
      return row === undefined ? '' : cell(row);
    }),
  ]);
  return table(columns, lines);
}

function wholeNumber(value: string, min: number): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`expected a whole number of at least ${min}`);
  return n;
}

function clientList(value: string): number[] {
  const items = value.split(',');
  if (items.some((item) => !/^\s*\d+\s*$/.test(item) || !Number.isSafeInteger(Number(item)) || Number(item) < 1)) {
    throw new InvalidArgumentError('expected whole numbers of clients of at least 1, comma-separated (such as 10,20,50,100)');
  }
  return [...new Set(items.map(Number))];
}

function runCount(value: string): number {
  return wholeNumber(value, 1);
}

function seedNumber(value: string): number {
  const n = Number(value);
  if (!/^\s*-?\d+\s*$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected a whole number');
  return n;
}

function strategyList(value: string): ContentionStrategy[] {
  const items = value.split(',').map((item) => item.trim());
  for (const item of items) {
    if (!(CONTENTION_STRATEGIES as readonly string[]).includes(item)) throw new InvalidArgumentError(`unknown strategy ${JSON.stringify(item)}: expected ${CONTENTION_STRATEGIES.join(', ')}, comma-separated`);
  }
  return [...new Set(items as ContentionStrategy[])];
}

function milliseconds(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError('expected a finite number of milliseconds of at least 0');
  return n;
}
