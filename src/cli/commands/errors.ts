import type { FileHandle } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { HEADER } from '../../headers/names.js';
import { readRetryState } from '../../headers/retry-state.js';
import { readFailureFacts } from '../../headers/failure.js';
import { signatureOf, type FailureGroup } from '../../operations/signature.js';
import type { BulkOptions, BulkSummary, EntryResult, ErrorEntry, ErrorQueueOperations } from '../../transport/error-queue.js';
import type { Transport } from '../../transport/types.js';
import { checkKey, checkSignature, pages, scanGroups } from '../error-scan.js';
import { indent, multiLine, oneLine, plural, previewBody, shortTime, table, truncate, utf8 } from '../format.js';
import { UsageError } from '../open-transport.js';
import { STORE_HELP, storeFile } from '../store-session.js';
import { IncompleteError, InterruptedError, type CliIo } from '../program.js';
import { ProgressBar } from '../progress.js';
import { isSendBackRefused } from '../../operations/send-back-destination.js';
import { addStoreRetryOptions, registerStoreCommands, retriesFromStore, storeRetry, type StoreRetryOptions } from './errors-store-retry.js';
import { registerIngest } from './errors-ingest.js';
import { runOnStore, storeOptions, type EntryRenderers, type ShowExtra } from './errors-store.js';
import { collect, interruption, OPTIONAL_TARGET_HELP, queueName, shownTarget, TARGET_HELP, withTransport, write } from '../session.js';
import { openPrivateFile } from '../../util/private-file.js';

/** Options every `errors` subcommand takes. */
interface QueueOptions {
  /** Default `error`. */
  errorQueue: string;
  json?: boolean;
}

interface ShowOptions extends QueueOptions {
  /** Default 4096. */
  bodyBytes: number;
}

interface SelectOptions extends QueueOptions {
  group?: string;
  all?: boolean;
}

interface RetryOptions extends SelectOptions {
  to?: string;
  /** The only queues messages may be sent to. Default: any existing work queue. */
  allowQueue?: string[];
}

interface DeleteOptions extends SelectOptions {
  yes?: boolean;
}

interface ExportOptions {
  errorQueue: string;
  out?: string;
}

/** Which entries a retry or delete works on. */
type Selection = { kind: 'key'; key: string } | { kind: 'group'; signature: string } | { kind: 'all' };

/**
 * `redeliver errors list|show|retry|delete|export <target>`: what an
 * operator does with an error queue from a terminal or a script.
 */
export function registerErrors(program: Command): void {
  const errors = program
    .command('errors')
    .description('read, send back, delete and export the messages in an error queue, in place or from the error store');
  const renderers: EntryRenderers = { showEntry, exportLine };

  const queueOption = (command: Command) =>
    command.option('--error-queue <name>', 'the error queue to work on', queueName, 'error');

  storeOptions(
    queueOption(
      errors
        .command('list')
        .description('group the messages of an error queue by failure signature, largest group first')
        .argument('[target]', OPTIONAL_TARGET_HELP),
    ).option('--json', 'print JSON for scripts'),
  )
    .action(async (target: string | undefined, opts: QueueOptions, command: Command) => {
      if (await runOnStore(command, [target], renderers)) return;
      await withErrorQueue(command, target, (ops, _transport, io) => listErrors(ops, target, opts, io));
    });

  queueOption(
    errors
      .command('show')
      .description('show one message: failure, stack, attempt history, headers and body')
      .argument('[target]', `${TARGET_HELP} (none with --store)`)
      .argument('[key]', 'the entry key, as errors list --json prints it'),
  )
    .option('--body-bytes <bytes>', 'bytes of the body to show', byteCount, 4096)
    .option('--json', 'print JSON for scripts')
    .option('--store <file>', STORE_HELP, storeFile)
    .action(async (target: string | undefined, key: string | undefined, opts: ShowOptions, command: Command) => {
      if (await runOnStore(command, [target, key], renderers)) return;
      if (target === undefined || key === undefined) throw new UsageError('name the entry: errors show <target> <key>, or errors show --store <file> <key>');
      await withErrorQueue(command, target, async (ops, transport, io) => {
        checkKey(transport, key);
        const entry = await ops.get(opts.errorQueue, key);
        if (!entry) throw new Error(`no entry with key ${oneLine(key)} in error queue '${oneLine(opts.errorQueue)}' (sent back or deleted already?)`);
        await showEntry(entry, opts, io);
      });
    });

  addStoreRetryOptions(queueOption(
    errors
      .command('retry')
      .description('send messages back to the queue they failed on (or --to another), with a fresh retry state')
      .argument('<target>', TARGET_HELP)
      .argument('[key]', 'the entry key of one message'),
  )
    .option('--group <signature>', 'every message with this failure signature')
    .option('--all', 'every message in the error queue')
    .option('--to <queue>', 'send to this queue instead of the one each message failed on', queueName)
    .option('--allow-queue <queue>', 'send only to this queue; repeat for more (default: any existing work queue)', (value: string, previous: string[] | undefined) =>
      collect(queueName(value), previous),
    )
    .option('--json', 'print the summary as JSON'))
    .action(async (target: string, key: string | undefined, opts: RetryOptions & StoreRetryOptions, command: Command) => {
      if (retriesFromStore(command)) return storeRetry(command, target, key, opts);
      const selection = selectionOf(key, opts);
      if (opts.to !== undefined && opts.to === opts.errorQueue) throw new UsageError(`--to ${opts.to} is the error queue itself; name a work queue`);
      if (opts.to !== undefined && opts.allowQueue !== undefined && !opts.allowQueue.includes(opts.to)) {
        throw new UsageError(`--to ${opts.to} is not one of the --allow-queue queues`);
      }
      await withErrorQueue(command, target, (ops, transport, io) => retryErrors(ops, transport, selection, opts, io));
    });

  storeOptions(
    queueOption(
      errors
        .command('delete')
        .description('remove messages from the error queue (or the error store) for good')
        .argument('[target]', `${TARGET_HELP} (none with --store)`)
        .argument('[key]', 'the entry key of one message'),
    )
      .option('--group <signature>', 'every message with this failure signature (needs --yes)')
      .option('--all', 'every message in the error queue (needs --yes)')
      .option('--yes', 'confirm deleting a group or the whole queue')
      .option('--json', 'print the summary as JSON'),
  )
    .action(async (target: string | undefined, key: string | undefined, opts: DeleteOptions, command: Command) => {
      if (await runOnStore(command, [target, key], renderers)) return;
      const selection = selectionOf(key, opts);
      if (selection.kind !== 'key' && !opts.yes) {
        const what = selection.kind === 'all' ? `every message in '${opts.errorQueue}'` : `every message of group ${selection.signature}`;
        throw new UsageError(`this deletes ${what} for good: add --yes to confirm`);
      }
      await withErrorQueue(command, target, (ops, transport, io) => deleteErrors(ops, transport, selection, opts, io));
    });

  storeOptions(
    queueOption(
      errors
        .command('export')
        .description('write every message of an error queue as NDJSON, one entry a line, oldest first')
        .argument('[target]', OPTIONAL_TARGET_HELP),
    ).option('--out <file>', 'write to this file instead of stdout, created with mode 0600 (a symbolic link is refused)'),
  )
    .action(async (target: string | undefined, opts: ExportOptions, command: Command) => {
      if (await runOnStore(command, [target], renderers)) return;
      await withErrorQueue(command, target, (ops, _transport, io) => exportErrors(ops, opts, io));
    });

  registerStoreCommands(errors);
  registerIngest(errors);
}

async function withErrorQueue(
  command: Command,
  target: string | undefined,
  fn: (ops: ErrorQueueOperations, transport: Transport, io: CliIo) => Promise<void>,
): Promise<void> {
  await withTransport(command, target, async (transport, io) => {
    const ops = transport.errorQueue;
    if (!ops) throw new UsageError(`the ${transport.name} transport cannot read error queues yet (no error-queue operations)`);
    await fn(ops, transport, io);
  });
}

function selectionOf(key: string | undefined, opts: SelectOptions): Selection {
  const given = [key !== undefined, opts.group !== undefined, opts.all === true].filter(Boolean).length;
  if (given !== 1) throw new UsageError('name what to work on: one <key>, or --group <signature>, or --all');
  if (key !== undefined) return { kind: 'key', key };
  if (opts.group !== undefined) return { kind: 'group', signature: checkSignature(opts.group) };
  return { kind: 'all' };
}

// ---------------------------------------------------------------- list

async function listErrors(ops: ErrorQueueOperations, target: string | undefined, opts: QueueOptions, io: CliIo): Promise<void> {
  const progress = new ProgressBar(io.stderr, 'reading', await ops.count(opts.errorQueue));
  const { scanned, groups } = await scanGroups(ops, opts.errorQueue, (n) => progress.tick(n));
  progress.finish();
  if (opts.json) {
    const json = { errorQueue: opts.errorQueue, total: scanned, groups: groups.map(groupJson) };
    await write(io.stdout, `${JSON.stringify(json, null, 2)}\n`);
    return;
  }
  const queue = `error queue '${oneLine(opts.errorQueue)}'`;
  if (scanned === 0) {
    await write(io.stdout, `${queue} is empty\n`);
    return;
  }
  const lines = [`${queue}: ${plural(scanned, 'message')} in ${plural(groups.length, 'failure group')}`, ''];
  const rows = table(
    [
      { title: 'SIGNATURE' },
      { title: 'COUNT', align: 'right' },
      { title: 'REASON', max: 24 },
      { title: 'ERROR', max: 30 },
      { title: 'MESSAGE', max: 60 },
      { title: 'FIRST SEEN' },
      { title: 'LAST SEEN' },
    ],
    groups.map((g) => [g.signature.id, String(g.count), g.signature.reason, g.signature.errorName, g.signature.message, shortTime(g.firstSeen), shortTime(g.lastSeen)]),
  );
  lines.push(rows[0]!);
  groups.forEach((g, i) => {
    lines.push(rows[i + 1]!);
    const frame = g.signature.topFrame === '' ? '' : ` · ${truncate(oneLine(g.signature.topFrame), 100)}`;
    lines.push(`  oldest key ${truncate(oneLine(g.keys[0] ?? '-'), 40)}${frame}`);
  });
  const shown = oneLine(shownTarget(target));
  lines.push('', `show one:      redeliver errors show ${shown} <key>`, `retry a group: redeliver errors retry ${shown} --group <signature>`);
  await write(io.stdout, `${lines.join('\n')}\n`);
}

function groupJson(g: FailureGroup) {
  return {
    signature: g.signature.id,
    count: g.count,
    reason: g.signature.reason,
    errorName: g.signature.errorName,
    message: g.signature.message,
    topFrame: g.signature.topFrame,
    firstSeen: g.firstSeen,
    lastSeen: g.lastSeen,
    keys: g.keys,
  };
}

// ---------------------------------------------------------------- show

async function showEntry(entry: ErrorEntry, opts: { bodyBytes: number; json?: boolean }, io: CliIo, extra?: ShowExtra): Promise<void> {
  const h = entry.headers;
  const get = (name: string) => (Object.prototype.hasOwnProperty.call(h, name) && typeof h[name] === 'string' ? h[name]! : '');
  const signature = signatureOf(h);
  const history = readRetryState(h).history;
  const body = previewBody(entry.body, opts.bodyBytes);
  const headerNames = Object.keys(h)
    .filter((name) => typeof h[name] === 'string')
    .sort();
  if (opts.json) {
    const json = {
      key: entry.key,
      messageId: entry.messageId,
      errorQueue: entry.errorQueue,
      originalQueue: get(HEADER.failureQueue),
      signature,
      failure: readFailureFacts(h),

      history,
      ...extra?.json,
      headers: Object.fromEntries(headerNames.map((name) => [name, h[name]!])),
      body,
    };
    await write(io.stdout, `${JSON.stringify(json, null, 2)}\n`);
    return;
  }
  const field = (label: string, value: string) => `  ${label.padEnd(16)}${value === '' ? '-' : oneLine(value)}`;
  const attempts = get(HEADER.failureAttempts);
  const immediate = get(HEADER.failureImmediateAttempts);
  const delayed = get(HEADER.failureDelayedAttempts);
  const lines = [
    `entry ${oneLine(entry.key)} in error queue '${oneLine(entry.errorQueue)}'`,
    field('message id', entry.messageId),
    field('original queue', get(HEADER.failureQueue)),
    field('reason', get(HEADER.failureReason)),
    field('failed at', get(HEADER.failureTime)),
    field('endpoint', [get(HEADER.failureEndpoint), get(HEADER.failureHost)].filter(Boolean).join(' on ')),
    field('attempts', attempts === '' ? '' : `${attempts} (last round of immediate retries: ${immediate || '-'}, delayed retries: ${delayed || '-'})`),
    field('replayed', get(HEADER.replayCount) === '' ? 'never' : `${get(HEADER.replayCount)} times, last at ${get(HEADER.replayedAt)}`),
    field('signature', `${signature.id}  ${signature.errorName}: ${signature.message}`),
    '',
    'error',
    indent(multiLine(get(HEADER.failureStack) || `${get(HEADER.failureErrorName) || 'Error'}: ${get(HEADER.failureMessage)}`)),
    '',
  ];
  if (history.length === 0) {
    lines.push('attempt history: none recorded');
  } else {
    lines.push(`attempt history (oldest first, the last ${plural(history.length, 'failure')})`);
    const rows = table(
      [{ title: '#', align: 'right' }, { title: 'AT' }, { title: 'IMMEDIATE', align: 'right' }, { title: 'DELAYED', align: 'right' }, { title: 'ERROR', max: 30 }, { title: 'MESSAGE', max: 80 }],
      history.map((r, i) => [String(i + 1), shortTime(r.at), String(r.immediateAttempt), String(r.delayedAttempt), r.errorName, r.message]),
    );
    lines.push(indent(rows.join('\n')));
  }
  lines.push('', ...(extra?.lines ?? []), 'headers');
  for (const name of headerNames) lines.push(`  ${oneLine(name)}: ${truncate(oneLine(h[name]!), 200)}`);
  const size = `${plural(body.size, 'byte')}${body.truncated ? `, first ${body.shownBytes} shown` : ''}`;
  lines.push('', `body (${body.encoding === 'utf8' ? 'UTF-8' : 'binary, hex'}, ${size})`);
  if (body.size > 0) lines.push(indent(body.encoding === 'utf8' ? multiLine(body.text) : body.text));
  await write(io.stdout, `${lines.join('\n')}\n`);
}

// ---------------------------------------------------------------- retry and delete

/** What a retry or delete did, counted from the result of each entry. */
interface Outcome {
  /** Entries read. */
  read: number;
  /** Entries selected. */
  selected: number;
  /** Entries sent back or deleted. */
  done: number;
  /** Entries that had gone already (sent back or deleted by someone else between the read and the act). */
  alreadyGone: number;
  /** Entries left in the error queue because their destination was refused (missing, an error queue, not allowed). */
  refused: number;
  /** Why the first refused entry was refused. */
  firstRefusal?: string;
  /** Entries the operation failed on. */
  failed: number;
  /** The first of them. */
  firstFailure?: { key: string; error: string };
  /** Entries in the queue when the run began that another reader held, so this run never saw them. */
  unseen: number;
  /** Entries sent back, by destination queue. */
  queues: Record<string, number>;
  interrupted: boolean;
  /** The error that ended the pass before it read the whole queue. */
  stoppedBy?: string;
}

/** The predicate of a group or `--all` selection. */
function selects(selection: Exclude<Selection, { kind: 'key' }>): (entry: ErrorEntry) => boolean {
  return selection.kind === 'all' ? () => true : (entry) => signatureOf(entry.headers).id === selection.signature;
}

/**
 * Runs a bulk operation over the error queue in one pass, counting the
 * result of every selected entry as it comes, so that a pass that fails
 * half-way still reports what it did.
 */
async function runBulk(
  ops: ErrorQueueOperations,
  errorQueue: string,
  label: string,
  io: CliIo,
  signal: AbortSignal,
  run: (options: BulkOptions) => Promise<BulkSummary>,
  select: (entry: ErrorEntry) => boolean,
): Promise<Outcome> {
  const outcome: Outcome = { read: 0, selected: 0, done: 0, alreadyGone: 0, refused: 0, failed: 0, unseen: 0, queues: {}, interrupted: false };
  const progress = new ProgressBar(io.stderr, label, await ops.count(errorQueue));
  const onResult = (result: EntryResult) => {
    switch (result.outcome) {
      case 'sent':
        outcome.queues[result.queue] = (outcome.queues[result.queue] ?? 0) + 1;
        outcome.done++;
        break;
      case 'deleted':
        outcome.done++;
        break;
      case 'gone':
        outcome.alreadyGone++;
        break;
      case 'refused':
        outcome.refused++;
        outcome.firstRefusal ??= result.error.message;
        break;
      case 'failed':
        outcome.failed++;
        outcome.firstFailure ??= { key: result.entry.key, error: result.error instanceof Error ? result.error.message : String(result.error) };
        break;
    }
  };
  try {
    const summary = await run({
      select: (entry) => {
        const chosen = select(entry);
        if (chosen) outcome.selected++;
        return chosen;
      },
      onResult,
      onRead: (n) => {
        outcome.read += n;
        progress.tick(n);
      },
      signal,
    });
    outcome.unseen = summary.unseen;
    outcome.interrupted = summary.interrupted;
  } catch (error) {
    outcome.stoppedBy = error instanceof Error ? error.message : String(error);
  } finally {
    progress.finish();
  }
  return outcome;
}

async function retryErrors(ops: ErrorQueueOperations, transport: Transport, selection: Selection, opts: RetryOptions, io: CliIo): Promise<void> {
  if (opts.to !== undefined && transport.inspection) {
    const [depth] = await transport.inspection.queueDepths([opts.to]);
    if (depth?.kind === 'error') throw new UsageError(`--to ${opts.to} is an error queue; name a work queue`);
  }
  const destination = { ...(opts.to === undefined ? {} : { queue: opts.to }), ...(opts.allowQueue === undefined ? {} : { allowedQueues: opts.allowQueue }) };
  let outcome: Outcome;
  if (selection.kind === 'key') {
    checkKey(transport, selection.key);
    outcome = await oneKey(async () => {
      const queue = await ops.sendBack(opts.errorQueue, selection.key, destination);
      return queue === undefined ? undefined : { queue };
    });
  } else {
    const { signal, dispose } = interruption(io);
    try {
      outcome = await runBulk(ops, opts.errorQueue, 'sending back', io, signal, (o) => ops.sendBackEach(opts.errorQueue, { ...o, ...destination }), selects(selection));
    } finally {
      dispose();
    }
    noteEmptyGroup(selection, outcome, opts.errorQueue, io);
  }
  const queues = Object.entries(outcome.queues)
    .map(([queue, n]) => `${oneLine(queue)}: ${n}`)
    .join(', ');
  await report(outcome, io, opts.json, {
    json: {
      sentBack: outcome.done,
      alreadyGone: outcome.alreadyGone,
      refused: outcome.refused,
      failed: outcome.failed,
      unseen: outcome.unseen,
      read: outcome.read,
      selected: outcome.selected,
      queues: outcome.queues,
      interrupted: outcome.interrupted,
    },
    human: `sent back ${outcome.done}${queues === '' ? '' : ` (${queues})`}, already gone ${outcome.alreadyGone}${outcome.refused === 0 ? '' : `, refused ${outcome.refused}`}`,
    verb: 'send back',
    errorQueue: opts.errorQueue,
  });
}

async function deleteErrors(ops: ErrorQueueOperations, transport: Transport, selection: Selection, opts: DeleteOptions, io: CliIo): Promise<void> {
  if (selection.kind === 'all') {
    // One operation on the store: everything in the queue at that moment goes.
    const deleted = await ops.purge(opts.errorQueue);
    await write(io.stdout, opts.json ? `${JSON.stringify({ deleted, alreadyGone: 0, interrupted: false })}\n` : `deleted ${deleted}\n`);
    return;
  }
  let outcome: Outcome;
  if (selection.kind === 'key') {
    checkKey(transport, selection.key);
    outcome = await oneKey(async () => ((await ops.delete(opts.errorQueue, selection.key)) ? {} : undefined));
  } else {
    const { signal, dispose } = interruption(io);
    try {
      outcome = await runBulk(ops, opts.errorQueue, 'deleting', io, signal, (o) => ops.deleteEach(opts.errorQueue, o), selects(selection));
    } finally {
      dispose();
    }
    noteEmptyGroup(selection, outcome, opts.errorQueue, io);
  }
  await report(outcome, io, opts.json, {
    json: {
      deleted: outcome.done,
      alreadyGone: outcome.alreadyGone,
      failed: outcome.failed,
      unseen: outcome.unseen,
      read: outcome.read,
      selected: outcome.selected,
      interrupted: outcome.interrupted,
    },
    human: `deleted ${outcome.done}, already gone ${outcome.alreadyGone}`,
    verb: 'delete',
    errorQueue: opts.errorQueue,
  });
}

/** The outcome of acting on one key: `act` resolves undefined when the entry was not there. */
async function oneKey(act: () => Promise<{ queue?: string } | undefined>): Promise<Outcome> {
  const outcome: Outcome = { read: 0, selected: 1, done: 0, alreadyGone: 0, refused: 0, failed: 0, unseen: 0, queues: {}, interrupted: false };
  try {
    const done = await act();
    if (done === undefined) outcome.alreadyGone++;
    else {
      outcome.done++;
      if (done.queue !== undefined) outcome.queues[done.queue] = 1;
    }
  } catch (error) {
    if (!isSendBackRefused(error)) throw error;
    outcome.refused++;
    outcome.firstRefusal = error.message;
  }
  return outcome;
}

function noteEmptyGroup(selection: Selection, outcome: Outcome, errorQueue: string, io: CliIo): void {
  if (selection.kind === 'group' && outcome.selected === 0 && outcome.unseen === 0 && outcome.stoppedBy === undefined && !outcome.interrupted) {
    io.stderr.write(`redeliver: no message in error queue '${oneLine(errorQueue)}' has signature ${selection.signature}\n`);
  }
}

/**
 * Prints the summary line (or JSON), then fails the command when not every
 * selected entry is accounted for: interrupted (130), the pass stopped by
 * an error, entries failed or refused (1), entries held by another reader
 * and never seen (3).
 */
async function report(outcome: Outcome, io: CliIo, json: boolean | undefined, text: { json: object; human: string; verb: string; errorQueue: string }): Promise<void> {
  const extra = [outcome.failed > 0 ? `, failed ${outcome.failed}` : '', outcome.unseen > 0 ? `, unseen ${outcome.unseen}` : ''].join('');
  await write(io.stdout, json ? `${JSON.stringify(text.json)}\n` : `${text.human}${extra}\n`);
  if (outcome.stoppedBy !== undefined) {
    throw new Error(`stopped after reading ${plural(outcome.read, 'entry', 'entries')}: ${oneLine(outcome.stoppedBy)}; the entries reported done are done, run the same command again to continue`);
  }
  if (outcome.interrupted) throw new InterruptedError(`interrupted after reading ${plural(outcome.read, 'entry', 'entries')}; run the same command again to continue`);
  if (outcome.firstFailure) {
    throw new Error(
      `could not ${text.verb} ${plural(outcome.failed, 'entry', 'entries')}, the first ${oneLine(outcome.firstFailure.key)}: ${oneLine(outcome.firstFailure.error)}; ` +
        'run the same command again to retry them',
    );
  }
  if (outcome.firstRefusal !== undefined) {
    throw new Error(`${plural(outcome.refused, 'entry was', 'entries were')} refused and stay in the error queue; the first: ${oneLine(outcome.firstRefusal)}`);
  }
  if (outcome.unseen > 0) {
    throw new IncompleteError(
      `${plural(outcome.unseen, 'entry', 'entries')} in error queue '${oneLine(text.errorQueue)}' when this run began ${outcome.unseen === 1 ? 'was' : 'were'} ` +
        'held by another reader (another retry or delete, a dashboard, a consumer of the error queue) and never seen by this run; ' +
        'some may be among those selected: run the same command again once the other reader has finished',
    );
  }
}

// ---------------------------------------------------------------- export

/** One line of `errors export`. */
export interface ExportLine {
  key: string;
  messageId: string;
  errorQueue: string;
  /** The failure signature id, as `errors list` shows it. */
  signature: string;
  headers: Record<string, string>;
  /** The body, base64. */
  bodyBase64: string;
  /** The body as text, present only when it is valid UTF-8. */
  bodyText?: string;
}

async function exportErrors(ops: ErrorQueueOperations, opts: ExportOptions, io: CliIo): Promise<void> {
  let file: FileHandle | undefined;
  if (opts.out !== undefined) {
    try {
      file = await openPrivateFile(opts.out);
    } catch (error) {
      throw new UsageError(`cannot write ${opts.out}: ${(error as Error).message}`);
    }
  }
  const out = file;
  const emit = out ? async (text: string) => void (await out.write(text)) : (text: string) => write(io.stdout, text);
  // Draw a bar only when the NDJSON does not go to the same terminal.
  const total = await ops.count(opts.errorQueue);
  const progress = new ProgressBar(io.stderr, 'exporting', out === undefined && io.stdout.isTTY ? 0 : total);
  const { signal, dispose } = interruption(io);
  let exported = 0;
  try {
    for await (const page of pages(ops, opts.errorQueue)) {
      let text = '';
      for (const entry of page) text += `${JSON.stringify(exportLine(entry))}\n`;
      await emit(text);
      exported += page.length;
      progress.tick(page.length);
      if (signal.aborted || (out === undefined && io.stdout.closed)) break;
    }
  } finally {
    progress.finish();
    dispose();
    await file?.close();
  }
  if (opts.out !== undefined) io.stderr.write(`exported ${plural(exported, 'entry', 'entries')} from '${oneLine(opts.errorQueue)}' to ${oneLine(opts.out)}\n`);
  if (signal.aborted) throw new InterruptedError(`interrupted after ${plural(exported, 'entry', 'entries')}; the export is incomplete`);
}

export function exportLine(entry: ErrorEntry): ExportLine {
  const text = utf8(entry.body);
  return {
    key: entry.key,
    messageId: entry.messageId,
    errorQueue: entry.errorQueue,
    signature: signatureOf(entry.headers).id,
    headers: { ...entry.headers },
    bodyBase64: Buffer.from(entry.body.buffer, entry.body.byteOffset, entry.body.byteLength).toString('base64'),
    ...(text === undefined ? {} : { bodyText: text }),
  };
}

function byteCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 16 * 1024 * 1024) throw new InvalidArgumentError('expected a whole number of bytes from 0 to 16777216');
  return n;
}
