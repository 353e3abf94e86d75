/**
 * `redeliver errors ingest <target> --store <file>`: moves error-queue
 * entries from a broker into the error store, where every other `--store`
 * command serves them. An entry is acknowledged to its broker only after
 * the store committed it; a copy delivered again after a crash is stored
 * once.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { Ingester, type IngesterStats } from '../../error-store/ingester.js';
import type { Logger } from '../../logger.js';
import { systemClock } from '../../time/clock.js';
import { redactCredentials } from '../../util/redact.js';
import { oneLine, plural } from '../format.js';
import { UsageError } from '../open-transport.js';
import { InterruptedError, ioOf, type CliIo, type OutputStream } from '../program.js';
import { collect, interruption, queueName, TARGET_HELP, withTransport, write } from '../session.js';
import { DEFAULT_STORE_BUSY_MS, STORE_ENV, STORE_HELP, storeFile, storePath, withStore } from '../store-session.js';

interface IngestOptions {
  store?: string;
  /** Default `['error']`. */
  errorQueue?: string[];
  outcomeQueue?: string;
  once?: boolean;
  /** Default 500. */
  batchSize: number;
  /** Default {@link DEFAULT_STORE_BUSY_MS}. */
  busyTimeout: number;
  json?: boolean;
}

/** How often the progress line is redrawn on a terminal, ms. */
const PROGRESS_EVERY_MS = 250;

/** Registers `errors ingest` on the `errors` command. */
export function registerIngest(errors: Command): void {
  errors
    .command('ingest')
    .description('move the entries of error queues into the error store (acknowledged once stored), until stopped or, with --once, until the queues are empty')
    .argument('[target]', TARGET_HELP)
    .option('--store <file>', `${STORE_HELP}; created when missing`, storeFile)
    .option('--error-queue <name>', 'an error queue to ingest; repeat for more (default: error)', (value: string, previous: string[] | undefined) => collect(queueName(value), previous))
    .option('--outcome-queue <name>', "the endpoints' replayOutcomeQueue: its records mark sent-back entries handled", queueName)
    .option('--once', 'stop once the error queues read empty')
    .option('--batch-size <n>', 'entries committed in one transaction at most, 1 to 10000', wholeNumber(1, 10_000), 500)
    .option('--busy-timeout <ms>', 'how long a write waits for another process holding the store, ms', wholeNumber(0, 600_000), DEFAULT_STORE_BUSY_MS)
    .option('--json', 'print the summary as JSON')
    .action(async (target: string | undefined, opts: IngestOptions, command: Command) => {
      const errorQueues = opts.errorQueue ?? ['error'];
      if (opts.outcomeQueue !== undefined && errorQueues.includes(opts.outcomeQueue)) throw new UsageError(`--outcome-queue ${opts.outcomeQueue} is one of the error queues`);
      await ingest(command, target, opts, errorQueues);
    });
}

async function ingest(command: Command, target: string | undefined, opts: IngestOptions, errorQueues: string[]): Promise<void> {
  const store = storePath(opts, ioOf(command).env ?? process.env);
  if (!store) throw new UsageError(`no error store: give --store <file> or set ${STORE_ENV}`);
  await withStore(command, store.path, { create: true, busyTimeoutMs: opts.busyTimeout, probeWrite: true }, (errorStore, io) =>
    withTransport(command, target, async (transport) => {
      const ingester = new Ingester({ transport, store: errorStore, errorQueues, batchSize: opts.batchSize, logger: stderrLogger(io.stderr), ...(opts.outcomeQueue === undefined ? {} : { outcomeQueue: opts.outcomeQueue }) });
      const { signal, dispose } = interruption(io);
      const started = systemClock.monotonic();
      const progress = progressLine(io.stderr, ingester.stats);
      let finished = false;
      try {
        await ingester.start();
        if (opts.once) {
          await ingester.untilIdle({ signal }).then(
            () => (finished = true),
            () => undefined,
          );
        } else {
          await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
          finished = true;
        }
      } finally {
        // Commits and acknowledges what it holds, whatever ended the run.
        await ingester.stop();
        progress.stop();
        dispose();
      }
      await summary(io, ingester.stats, systemClock.monotonic() - started, opts.json);
      if (!finished) throw new InterruptedError('interrupted before the error queues were empty; what was read is stored, run the same command again to continue');
    }),
  );
}

async function summary(io: CliIo, stats: IngesterStats, ms: number, json: boolean | undefined): Promise<void> {
  const seconds = Math.round(ms / 100) / 10;
  if (json) {
    const { stored, duplicates, failedAgain, handled, badOutcomes, batches, commitFailures, ackFailures } = stats;
    await write(io.stdout, `${JSON.stringify({ stored, duplicates, failedAgain, handled, badOutcomes, batches, commitFailures, ackFailures, seconds })}\n`);
    return;
  }
  const extra = [stats.commitFailures > 0 ? `, ${plural(stats.commitFailures, 'commit')} tried again` : '', stats.ackFailures > 0 ? `, ${stats.ackFailures} acknowledgements failed` : ''].join('');
  await write(
    io.stdout,
    `stored ${stats.stored}, duplicates ${stats.duplicates}, failed again ${stats.failedAgain}, handled ${stats.handled}${extra} in ${seconds} s\n`,
  );
}

/** Redraws `ingesting: stored N, …` in place on a terminal; draws nothing elsewhere. */
function progressLine(stream: OutputStream, stats: IngesterStats): { stop: () => void } {
  if (stream.isTTY !== true) return { stop: () => undefined };
  let drawn = '';
  const draw = () => {
    const line = `ingesting: stored ${stats.stored}, duplicates ${stats.duplicates}, failed again ${stats.failedAgain}, handled ${stats.handled}`;
    if (line === drawn) return;
    drawn = line;
    stream.write(`\r\u001b[2K${line}`);
  };
  const timer = setInterval(draw, PROGRESS_EVERY_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      if (drawn !== '') stream.write('\r\u001b[2K');
    },
  };
}

/** A logger that writes one line per warning or error to `stream`, without passwords. */
function stderrLogger(stream: OutputStream): Logger {
  const line = (level: string) => (fields: object, message: string) => {
    const err = (fields as { err?: unknown }).err;
    const cause = err instanceof Error ? `: ${err.message}` : '';
    stream.write(`${stream.isTTY === true ? '\r\u001b[2K' : ''}redeliver: ${level}: ${oneLine(redactCredentials(message + cause))}\n`);
  };
  return { info: () => undefined, warn: line('warning'), error: line('error') };
}

function wholeNumber(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!(Number.isSafeInteger(n) && n >= min && n <= max)) throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    return n;
  };
}
