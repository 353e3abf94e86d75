import { open, type FileHandle } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { HEADER } from '../../headers/names.js';
import { readRetryState } from '../../headers/retry-state.js';
import { readFailureFacts } from '../../headers/failure.js';
import { signatureOf, type FailureGroup } from '../../operations/signature.js';
import type { ErrorEntry, ErrorQueueOperations } from '../../transport/error-queue.js';
import type { Transport } from '../../transport/types.js';
import { allKeys, checkKey, checkSignature, pages, scanGroups } from '../error-scan.js';
import { indent, multiLine, oneLine, plural, previewBody, shortTime, table, truncate, utf8 } from '../format.js';
import { UsageError } from '../open-transport.js';
import { STORE_HELP, storeFile } from '../store-session.js';
import { InterruptedError, type CliIo } from '../program.js';
import { ProgressBar } from '../progress.js';
import { isSendBackRefused } from '../../operations/send-back-destination.js';
import { registerIngest } from './errors-ingest.js';
import { runOnStore, storeOptions, type EntryRenderers, type ShowExtra } from './errors-store.js';
import { collect, interruption, OPTIONAL_TARGET_HELP, queueName, shownTarget, TARGET_HELP, withTransport, write } from '../session.js';

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

  queueOption(
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
    .option('--json', 'print the summary as JSON')
    .action(async (target: string, key: string | undefined, opts: RetryOptions, command: Command) => {
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
    ).option('--out <file>', 'write to this file instead of stdout'),
  )
    .action(async (target: string | undefined, opts: ExportOptions, command: Command) => {
      if (await runOnStore(command, [target], renderers)) return;
      await withErrorQueue(command, target, (ops, _transport, io) => exportErrors(ops, opts, io));
    });

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

/** What a retry or delete did. */
interface Outcome {
  /** Entries sent back or deleted. */
  done: number;
  /** Entries that had gone already (sent back, deleted or expired by someone else). */
  alreadyGone: number;
  /** Entries not reached because the operation stopped. */
  notAttempted: number;
  /** Entries left in the error queue because their destination was refused (missing, an error queue, not allowed). */
  refused: number;
  /** Why the first refused entry was refused. */
  firstRefusal?: string;
  /** Entries sent back, by destination queue. */
  queues: Record<string, number>;
  interrupted: boolean;
  failed?: { key: string; error: string };
}

/** The keys a selection covers, read before anything is changed, so messages that fail again and come back are not picked up twice. */
async function keysOf(
  ops: ErrorQueueOperations,
  transport: Transport,
  selection: Selection,
  errorQueue: string,
  io: CliIo,
  signal: AbortSignal,
): Promise<string[]> {
  if (selection.kind === 'key') {
    checkKey(transport, selection.key);
    return [selection.key];
  }
  const progress = new ProgressBar(io.stderr, 'reading', await ops.count(errorQueue));
  const onPage = (n: number) => {
    if (signal.aborted) throw new InterruptedError('interrupted while reading the error queue; nothing was changed');
    progress.tick(n);
  };
  try {
    if (selection.kind === 'all') return await allKeys(ops, errorQueue, onPage);
    const { groups } = await scanGroups(ops, errorQueue, onPage);
    const group = groups.find((g) => g.signature.id === selection.signature);
    if (!group) io.stderr.write(`redeliver: no message in error queue '${oneLine(errorQueue)}' has signature ${selection.signature}\n`);
    return group ? [...group.keys] : [];
  } finally {
    progress.finish();
  }
}

/**
 * Applies `step` to each key in turn, stopping between two keys when
 * interrupted and at the first error. Each step is safe on its own (a
 * confirmed copy before the entry goes), so running the command again after
 * a stop continues where it stopped.
 */
async function eachKey(
  keys: readonly string[],
  label: string,
  io: CliIo,
  signal: AbortSignal,
  step: (key: string) => Promise<string | undefined>,
): Promise<Outcome> {
  const outcome: Outcome = { done: 0, alreadyGone: 0, notAttempted: 0, refused: 0, queues: {}, interrupted: false };
  const progress = new ProgressBar(io.stderr, label, keys.length);
  try {
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (signal.aborted) {
        outcome.interrupted = true;
        outcome.notAttempted = keys.length - i;
        break;
      }
      let result: string | undefined;
      try {
        result = await step(key);
      } catch (error) {
        if (isSendBackRefused(error)) {
          // This entry's destination is refused; the others may be fine.
          outcome.refused++;
          outcome.firstRefusal ??= error.message;
          progress.tick();
          continue;
        }
        outcome.notAttempted = keys.length - i;
        outcome.failed = { key, error: error instanceof Error ? error.message : String(error) };
        break;
      }
      if (result === undefined) outcome.alreadyGone++;
      else {
        outcome.done++;
        outcome.queues[result] = (outcome.queues[result] ?? 0) + 1;
      }
      progress.tick();
    }
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
  const { signal, dispose } = interruption(io);
  let outcome: Outcome;
  try {
    const keys = await keysOf(ops, transport, selection, opts.errorQueue, io, signal);
    const options = { ...(opts.to === undefined ? {} : { queue: opts.to }), ...(opts.allowQueue === undefined ? {} : { allowedQueues: opts.allowQueue }) };
    outcome = await eachKey(keys, 'sending back', io, signal, (key) => ops.sendBack(opts.errorQueue, key, options));
  } finally {
    dispose();
  }
  const queues = Object.entries(outcome.queues)
    .map(([queue, n]) => `${oneLine(queue)}: ${n}`)
    .join(', ');
  await report(outcome, io, opts.json, {
    json: { sentBack: outcome.done, alreadyGone: outcome.alreadyGone, refused: outcome.refused, notAttempted: outcome.notAttempted, queues: outcome.queues, interrupted: outcome.interrupted, ...(outcome.failed ? { failed: outcome.failed } : {}) },
    human: `sent back ${outcome.done}${queues === '' ? '' : ` (${queues})`}, already gone ${outcome.alreadyGone}${outcome.refused === 0 ? '' : `, refused ${outcome.refused}`}`,
    verb: 'send back',
  });
}

async function deleteErrors(ops: ErrorQueueOperations, transport: Transport, selection: Selection, opts: DeleteOptions, io: CliIo): Promise<void> {
  if (selection.kind === 'all') {
    // One operation on the store: everything in the queue at that moment goes.
    const deleted = await ops.purge(opts.errorQueue);
    const outcome: Outcome = { done: deleted, alreadyGone: 0, notAttempted: 0, refused: 0, queues: {}, interrupted: false };
    await report(outcome, io, opts.json, { json: { deleted, alreadyGone: 0, notAttempted: 0, interrupted: false }, human: `deleted ${deleted}`, verb: 'delete' });
    return;
  }
  const { signal, dispose } = interruption(io);
  let outcome: Outcome;
  try {
    const keys = await keysOf(ops, transport, selection, opts.errorQueue, io, signal);
    outcome = await eachKey(keys, 'deleting', io, signal, async (key) => ((await ops.delete(opts.errorQueue, key)) ? opts.errorQueue : undefined));
  } finally {
    dispose();
  }
  await report(outcome, io, opts.json, {
    json: { deleted: outcome.done, alreadyGone: outcome.alreadyGone, notAttempted: outcome.notAttempted, interrupted: outcome.interrupted, ...(outcome.failed ? { failed: outcome.failed } : {}) },
    human: `deleted ${outcome.done}, already gone ${outcome.alreadyGone}`,
    verb: 'delete',
  });
}

/** Prints the summary line (or JSON), then fails the command when the operation stopped early. */
async function report(outcome: Outcome, io: CliIo, json: boolean | undefined, text: { json: object; human: string; verb: string }): Promise<void> {
  const stopped = outcome.interrupted || outcome.failed !== undefined;
  const rest = stopped ? `, not attempted ${outcome.notAttempted}` : '';
  await write(io.stdout, json ? `${JSON.stringify(text.json)}\n` : `${text.human}${rest}\n`);
  if (outcome.failed) {
    throw new Error(
      `could not ${text.verb} entry ${oneLine(outcome.failed.key)}: ${oneLine(outcome.failed.error)}; ` +
        `the entries before it are done, run the same command again to continue`,
    );
  }
  if (outcome.interrupted) throw new InterruptedError(`interrupted; run the same command again to continue`);
  if (outcome.firstRefusal !== undefined) {
    throw new Error(`${plural(outcome.refused, 'entry was', 'entries were')} refused and stay in the error queue; the first: ${oneLine(outcome.firstRefusal)}`);
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
      file = await open(opts.out, 'w');
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
