/**
 * The error-store paths of `redeliver errors`: `retry --store` (a retry job:
 * snapshot, claims, rate, canary, resume), `jobs` (the jobs of a store) and
 * `edit` (edit and retry one entry). See docs/error-store.md.
 */
import { readFile } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { editRequestId } from '../../error-store/edit.js';
import type { EntryFilter } from '../../error-store/filter.js';
import { parseRate } from '../../error-store/rate-limiter.js';
import { DEFAULT_CANARY_MAX_RATE } from '../../error-store/canary.js';
import { listRetryJobs, RetryJobs, type CanaryOptions, type RetryJobView, type RetrySelection } from '../../error-store/retry-jobs.js';
import { count, durationFlag } from '../policy-options.js';
import { oneLine, plural, shortTime, table } from '../format.js';
import { UsageError } from '../open-transport.js';
import { InterruptedError, ioOf, type CliIo } from '../program.js';
import { ProgressBar } from '../progress.js';
import { collect, interruption, osActor, queueName, TARGET_HELP, withTransport, write } from '../session.js';
import { addStoreFilterOptions, filterOf, givenFilterFlags, narrows, storeFile, storePath, STORE_HELP, withStore, type FilterOptions } from '../store-session.js';
import { systemClock } from '../../time/clock.js';

/** The options `errors retry` takes for the store path. */
export interface StoreRetryOptions extends FilterOptions {
  store?: string;
  all?: boolean;
  to?: string;
  allowQueue?: string[];
  errorQueue?: string;
  rate?: number;
  canary?: boolean;
  canaryStartRate?: number;
  canaryGrowth?: number;
  canaryWindow?: number;
  canaryOutcomeTimeout?: number;
  canaryMaxFailedAgain?: number;
  resume?: string;
  by?: string;
  json?: boolean;
}

/** Adds `--store`, the store filters and the retry-job options to the `errors retry` command. */
export function addStoreRetryOptions(command: Command): Command {
  return addStoreFilterOptions(command, false)
    .option('--rate <rate>', 'with --store: sends per second at most: 200/s, 200 or 12000/min (default unlimited; with --canary the fastest it goes, default 500/s)', rateOption)
    .option('--canary', 'with --store: send one entry, wait until it is handled, then speed up; stop by itself when messages fail again')
    .option('--canary-start-rate <rate>', 'with --canary: sends per second once the first message was handled (default 1/s)', rateOption)
    .option('--canary-growth <factor>', 'with --canary: rate multiplier per window in which messages were handled (default 2)', growthOption)
    .option('--canary-window <duration>', 'with --canary: how often outcomes are read and the rate adjusted (default 1s)', positiveDuration)
    .option('--canary-outcome-timeout <duration>', 'with --canary: the longest wait for an outcome before it stops (default 60s)', positiveDuration)
    .option('--canary-max-failed-again <n>', 'with --canary: messages that may fail again before it stops (default 0)', count)
    .option('--resume <job-id>', 'with --store: continue a retry job that stopped or was interrupted')
    .option('--by <name>', 'with --store: a name recorded after the operating-system user on each entry (cli:<user> as <name>)');
}

/**
 * Whether `errors retry` works on the store: `--store` given, or
 * `$REDELIVER_STORE` set. Store-only options without a store are refused.
 */
export function retriesFromStore(command: Command): boolean {
  const io = ioOf(command);
  if (storePath(command.opts<{ store?: string }>(), io.env ?? process.env) !== undefined) return true;
  const storeOnly = [...givenFilterFlags(command), ...['--rate', '--canary', ...CANARY_FLAGS.map((f) => f.flag), '--resume', '--by'].filter((flag) => given(command, flag))];
  if (storeOnly.length > 0) throw new UsageError(`${storeOnly.join(', ')} work on the error store only: add --store <file>`);
  return false;
}

/** `redeliver errors retry <target> --store errors.db ...`. */
export async function storeRetry(command: Command, target: string, key: string | undefined, opts: StoreRetryOptions): Promise<void> {
  const io = ioOf(command);
  const path = storePath(opts, io.env ?? process.env)!.path;
  const filter = filterOf(command, opts, systemClock.now());
  checkCanaryFlags(command, opts);
  await withStore(command, path, { create: false }, async (store) => {
    await withTransport(command, target, async (transport, io) => {
      const jobs = new RetryJobs({ store, transport });
      let job: RetryJobView;
      if (opts.resume !== undefined) {
        if (key !== undefined || opts.all || narrows(filter)) throw new UsageError('--resume continues a job as it was created: give no key, --all or filter');
        const found = jobs.get(opts.resume);
        if (!found) throw new UsageError(`no retry job ${oneLine(opts.resume)} in ${oneLine(path)}; redeliver errors jobs lists them`);
        job = found;
      } else {
        job = await jobs.create(selectionOf(key, opts.all === true, filter), {
          by: opts.by === undefined ? osActor() : `${osActor()} as ${opts.by}`,
          ...(opts.to === undefined ? {} : { to: opts.to }),
          ...(opts.allowQueue === undefined ? {} : { allowedQueues: opts.allowQueue }),
          ...(opts.canary ? { canary: canaryOf(opts) } : opts.rate === undefined ? {} : { ratePerSecond: opts.rate }),
        });
        await write(io.stderr, `retry job ${job.id}: ${plural(job.total, 'entry', 'entries')} (snapshot up to entry ${job.snapshotSeq})\n`);
      }
      const progress = new ProgressBar(io.stderr, 'retrying', job.total);
      let shown = done(job);
      const { signal, dispose } = interruption(io);
      let view: RetryJobView;
      try {
        view = await jobs.run(job.id, {
          signal,
          onProgress: (v) => {
            progress.tick(done(v) - shown);
            shown = done(v);
          },
        });
      } finally {
        dispose();
        progress.finish();
      }
      await report(view, io, opts.json === true);
    });
  });
}

/** Registers `errors jobs` and `errors edit`. */
export function registerStoreCommands(errors: Command): void {
  errors
    .command('jobs')
    .description('list the retry jobs of an error store, newest first')
    .argument('[target]', 'the broker the jobs send to (not opened: the jobs are in the store)')
    .option('--store <file>', STORE_HELP, storeFile)
    .option('--limit <n>', 'jobs to list', countOption, 20)
    .option('--json', 'print JSON for scripts')
    .action(async (_target: string | undefined, opts: { store?: string; limit: number; json?: boolean }, command: Command) => {
      await withStore(command, requiredStore(command, opts), { create: false }, async (store, io) => {
        const views = listRetryJobs(store, { limit: opts.limit });
        if (opts.json) {
          await write(io.stdout, `${JSON.stringify(views, null, 2)}\n`);
          return;
        }
        if (views.length === 0) {
          await write(io.stdout, `no retry jobs in ${oneLine(store.path)}\n`);
          return;
        }
        const rows = table(
          [{ title: 'JOB' }, { title: 'CREATED' }, { title: 'BY', max: 20 }, { title: 'STATE' }, { title: 'TOTAL', align: 'right' }, { title: 'SENT', align: 'right' }, { title: 'HANDLED ELSEWHERE', align: 'right' }, { title: 'REFUSED', align: 'right' }, { title: 'FAILED', align: 'right' }, { title: 'WHY', max: 60 }],
          views.map((v) => [v.id, shortTime(new Date(v.createdAt).toISOString()), v.by, v.state, String(v.total), String(v.sent), String(v.alreadyHandled), String(v.refused), String(v.failed), v.stopReason ?? '']),
        );
        await write(io.stdout, `${rows.join('\n')}\n`);
      });
    });

  errors
    .command('edit')
    .description('send an edited copy of one stored entry (same message id) and mark the original replaced')
    .argument('<target>', TARGET_HELP)
    .argument('<key>', 'the entry key')
    .option('--store <file>', STORE_HELP, storeFile)
    .option('--body-file <file>', 'the new body')
    .option('--set-header <name=value>', 'set a header; repeat for more', (value: string, previous: string[] | undefined) => collect(value, previous))
    .option('--remove-header <name>', 'remove a header; repeat for more', (value: string, previous: string[] | undefined) => collect(value, previous))
    .option('--to <queue>', 'send to this queue instead of the one the entry failed on', queueName)
    .option('--allow-queue <queue>', 'send only to this queue; repeat for more', (value: string, previous: string[] | undefined) => collect(queueName(value), previous))
    .option('--json', 'print the result as JSON')
    .action(async (target: string, key: string, opts: EditOptions, command: Command) => {
      if (opts.bodyFile === undefined && opts.setHeader === undefined && opts.removeHeader === undefined) {
        throw new UsageError('say what to change: --body-file, --set-header or --remove-header');
      }
      const body = opts.bodyFile === undefined ? undefined : await readFile(opts.bodyFile).catch((error: Error) => {
        throw new UsageError(`cannot read ${opts.bodyFile}: ${error.message}`);
      });
      await withStore(command, requiredStore(command, opts), { create: false }, async (store) => {
        const entry = store.get(key);
        if (!entry) throw new Error(`no entry ${oneLine(key)} in ${oneLine(store.path)}`);
        let headers: Record<string, string> | undefined;
        if (opts.setHeader !== undefined || opts.removeHeader !== undefined) {
          headers = { ...entry.headers };
          for (const pair of opts.setHeader ?? []) {
            const at = pair.indexOf('=');
            if (at <= 0) throw new UsageError(`--set-header takes name=value, got ${oneLine(pair)}`);
            headers[pair.slice(0, at)] = pair.slice(at + 1);
          }
          for (const name of opts.removeHeader ?? []) delete headers[name];
        }
        const bytes = body === undefined ? undefined : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
        await withTransport(command, target, async (transport, io) => {
          const result = await new RetryJobs({ store, transport }).editAndRetry(
            key,
            { ...(bytes === undefined ? {} : { body: bytes }), ...(headers === undefined ? {} : { headers }), by: osActor(), requestId: editRequestId(key, bytes, headers) },
            { ...(opts.to === undefined ? {} : { to: opts.to }), ...(opts.allowQueue === undefined ? {} : { allowedQueues: opts.allowQueue }) },
          );
          if (opts.json) await write(io.stdout, `${JSON.stringify({ key, ...result })}\n`);
          else if (result.duplicate) await write(io.stdout, `this edit of ${oneLine(key)} was sent before (to ${oneLine(result.sentTo)}); nothing sent\n`);
          else await write(io.stdout, `sent the edited copy of ${oneLine(key)} (message ${oneLine(result.messageId)}) to ${oneLine(result.sentTo)}; the original is marked replaced\n`);
        });
      });
    });
}

interface EditOptions {
  store?: string;
  bodyFile?: string;
  setHeader?: string[];
  removeHeader?: string[];
  to?: string;
  allowQueue?: string[];
  json?: boolean;
}

function done(view: RetryJobView): number {
  return view.sent + view.refused + view.alreadyHandled + view.failed;
}

async function report(view: RetryJobView, io: CliIo, json: boolean): Promise<void> {
  const pending = view.total - done(view);
  if (json) {
    await write(io.stdout, `${JSON.stringify({ ...view, pending })}\n`);
  } else {
    const lines = [
      `retry job ${view.id}: ${view.state}`,
      `  sent ${view.sent}, handled elsewhere ${view.alreadyHandled}, refused ${view.refused}, failed ${view.failed}, pending ${pending} of ${view.total}`,
    ];
    if (view.canary) lines.push(`  canary: ${view.canary.handled} handled, ${view.canary.failedAgain} failed again, last rate ${view.canary.rate}/s`);
    if (view.stopReason) lines.push(`  ${view.stopReason}`);
    if (view.state !== 'done') lines.push(`  resume: redeliver errors retry <target> --store <file> --resume ${view.id}`);
    await write(io.stdout, `${lines.join('\n')}\n`);
  }
  if (view.state === 'paused') throw new InterruptedError(`interrupted; resume with --resume ${view.id}`);
  if (view.state === 'stopped') throw new Error(`retry job ${view.id} stopped: ${view.stopReason}`);
  if (view.refused > 0 || view.failed > 0) throw new Error(`retry job ${view.id}: ${plural(view.refused, 'entry was', 'entries were')} refused and ${view.failed} failed; they stay failed in the store`);
}

function selectionOf(key: string | undefined, all: boolean, filter: EntryFilter): RetrySelection {
  const given = [key !== undefined, all, narrows(filter)].filter(Boolean).length;
  if (given !== 1) throw new UsageError('name what to retry: one <key>, --all, or filters (--group, --error-name, --reason, --text, --queue, --endpoint, --since, --until)');
  if (filter.status !== undefined && filter.status !== 'failed') throw new UsageError('a retry sends back failed entries only');
  return key !== undefined ? { keys: [key] } : { filter };
}

function requiredStore(command: Command, opts: { store?: string }): string {
  const found = storePath(opts, ioOf(command).env ?? process.env);
  if (!found) throw new UsageError('name the error store: --store <file> (or set $REDELIVER_STORE)');
  return found.path;
}

/** The ramp flags of a canary replay, and the option of {@link CanaryOptions} each sets. */
const CANARY_FLAGS = [
  { flag: '--canary-start-rate', option: 'startRate', key: 'canaryStartRate' },
  { flag: '--canary-growth', option: 'growth', key: 'canaryGrowth' },
  { flag: '--canary-window', option: 'windowMs', key: 'canaryWindow' },
  { flag: '--canary-outcome-timeout', option: 'outcomeTimeoutMs', key: 'canaryOutcomeTimeout' },
  { flag: '--canary-max-failed-again', option: 'maxFailedAgain', key: 'canaryMaxFailedAgain' },
] as const satisfies readonly { flag: string; option: keyof CanaryOptions; key: keyof StoreRetryOptions }[];

/** Whether `flag` was given on the command line (not a default). */
function given(command: Command, flag: string): boolean {
  return command.getOptionValueSource(command.options.find((o) => o.long === flag)!.attributeName()) === 'cli';
}

/** The canary options the flags give: `--rate` is its ceiling (`maxRate`), the `--canary-*` flags its ramp. */
function canaryOf(opts: StoreRetryOptions): CanaryOptions {
  const options: { -readonly [K in keyof CanaryOptions]: CanaryOptions[K] } = opts.rate === undefined ? {} : { maxRate: opts.rate };
  for (const { option, key } of CANARY_FLAGS) if (opts[key] !== undefined) options[option] = opts[key];
  const ceiling = options.maxRate ?? DEFAULT_CANARY_MAX_RATE;
  if (options.startRate !== undefined && options.startRate > ceiling) {
    throw new UsageError(`--canary-start-rate (${options.startRate}/s) is above the canary's ceiling --rate (${ceiling}/s${options.maxRate === undefined ? ', the default' : ''})`);
  }
  return options;
}

/** Refuses `--canary-*` flags without `--canary`. */
function checkCanaryFlags(command: Command, opts: StoreRetryOptions): void {
  if (opts.canary) return;
  const stray = CANARY_FLAGS.find(({ flag }) => given(command, flag));
  if (stray) throw new UsageError(`${stray.flag} needs --canary`);
}

function rateOption(value: string): number {
  try {
    return parseRate(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function growthOption(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 1) throw new InvalidArgumentError('expected a number of at least 1 (2 doubles the rate each window)');
  return n;
}

function positiveDuration(value: string): number {
  const ms = durationFlag(value);
  if (ms < 1) throw new InvalidArgumentError('expected a duration of at least 1 ms');
  return ms;
}

function countOption(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > 1_000) throw new InvalidArgumentError('expected a whole number from 1 to 1000');
  return n;
}
