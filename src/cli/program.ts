import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import type { Transport } from '../transport/types.js';
import { redactCredentials } from '../util/redact.js';
import { openTransport, RABBITMQ_PREFIX_ENV, ROCKETMQ_GROUP_ENV, ROCKETMQ_NAME_SERVER_ENV, UsageError } from './open-transport.js';

/** Where a command writes: a process stream, or anything with `write` (tests collect the text). */
export interface OutputStream {
  write(text: string): unknown;
  /** Whether the stream is a terminal: progress bars are drawn only then. */
  readonly isTTY?: boolean;
  /** Width of the terminal, when it is one. */
  readonly columns?: number;
  /** Present on process streams: lets long outputs wait for the pipe to drain. */
  once?(event: 'drain', listener: () => void): unknown;
  /** True once the reader went away (`redeliver errors export … | head`): further output is dropped. */
  readonly closed?: boolean;
}

/** The outside world of a command: its streams, what interrupts it, and how it opens a target. */
export interface CliIo {
  /** Results: tables, JSON, NDJSON, summaries. */
  readonly stdout: OutputStream;
  /** Error messages and progress bars. */
  readonly stderr: OutputStream;
  /**
   * Stops a long operation (retry, delete, export) between two messages;
   * what was done so far is reported. Without it, the real CLI stops on
   * SIGINT or SIGTERM (see `trapSignals`).
   */
  readonly signal?: AbortSignal;
  /** Whether long operations stop cleanly on SIGINT / SIGTERM. Default: true for the process streams, false for injected ones. */
  readonly trapSignals?: boolean;
  /** Opens a command's `<target>`. Default {@link openTransport}: a SQLite file, an amqp://, a redis:// or a nats:// URL, an nsq:// target or a rocketmq:// address. */
  readonly openTransport?: (target: string) => Promise<Transport>;
  /** Where `REDELIVER_URL` is read (the target of a command given `-` or none), `REDELIVER_REDIS_PREFIX`, `REDELIVER_NATS_PREFIX`, `REDELIVER_RABBITMQ_PREFIX` (which `--topology-prefix` overrides), `REDELIVER_ROCKETMQ_NAME_SERVER` and `REDELIVER_ROCKETMQ_GROUP` (which `--name-server` and `--consumer-group` override). Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** Thrown when a long operation stopped on request (Ctrl-C) after reporting what it did; the CLI exits with code 130. */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
}

/**
 * Thrown when a bulk operation could not see every entry it may have had to
 * act on (another reader held them), after reporting what it did; the CLI
 * exits with code 3.
 */
export class IncompleteError extends Error {
  override readonly name = 'IncompleteError';
}

const ioByProgram = new WeakMap<Command, CliIo>();

/**
 * The `redeliver` program without its commands: name, description, output
 * sent to `io`, and errors thrown instead of exiting the process (see
 * {@link runProgram}). Commands are registered on it with `registerX(program)`.
 */
export function buildProgram(io?: Partial<CliIo>): Command {
  const resolved: CliIo = {
    stdout: io?.stdout ?? processStdout(),
    stderr: io?.stderr ?? process.stderr,
    trapSignals: io?.trapSignals ?? io === undefined,
    ...(io?.signal ? { signal: io.signal } : {}),
    ...(io?.openTransport ? { openTransport: io.openTransport } : {}),
    env: io?.env ?? process.env,
  };
  const program = new Command()
    .name('redeliver')
    .description('Recoverability for message handlers: retries, delayed retries and error queues on SQLite, RabbitMQ and more.')
    .configureOutput({
      writeOut: (text) => void resolved.stdout.write(text),
      writeErr: (text) => void resolved.stderr.write(redactCredentials(text)),
    })
    .version(packageVersion(), '-V, --version', 'print the version of redeliver')
    .option('--topology-prefix <prefix>', `the topologyPrefix of the RabbitMQ transport of an amqp:// target (default redeliver; or $${RABBITMQ_PREFIX_ENV})`, nonEmpty)
    .option('--name-server <host:port>', `the name server of a rocketmq:// target (default the proxy's host on 9876; or $${ROCKETMQ_NAME_SERVER_ENV})`, nonEmpty)
    .option('--consumer-group <group>', `the consumer group of a rocketmq:// target (default redeliver; or $${ROCKETMQ_GROUP_ENV})`, nonEmpty)
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    // The flags, given before or after the command, win over the environment for every command that opens a target.
    .hook('preAction', () => {
      const { topologyPrefix, nameServer, consumerGroup } = program.opts<{ topologyPrefix?: string; nameServer?: string; consumerGroup?: string }>();
      const flags: Record<string, string> = {};
      if (topologyPrefix !== undefined) flags[RABBITMQ_PREFIX_ENV] = topologyPrefix;
      if (nameServer !== undefined) flags[ROCKETMQ_NAME_SERVER_ENV] = nameServer;
      if (consumerGroup !== undefined) flags[ROCKETMQ_GROUP_ENV] = consumerGroup;
      if (Object.keys(flags).length > 0) ioByProgram.set(program, { ...resolved, env: { ...resolved.env, ...flags } });
    });
  ioByProgram.set(program, resolved);
  return program;
}

function nonEmpty(value: string): string {
  if (value === '') throw new InvalidArgumentError('expected a value');
  return value;
}

/** The version in redeliver's package.json (two folders up from src/cli/ and from dist/cli/ alike). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/**
 * The process's stdout, tolerant of a reader that goes away: when a pipe
 * closes early the rest of the output is dropped quietly, as other command
 * line tools do, instead of crashing on EPIPE.
 */
function processStdout(): OutputStream {
  const stdout = process.stdout;
  let closed = false;
  stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    closed = true;
  });
  return {
    get isTTY() {
      return stdout.isTTY;
    },
    get columns() {
      return stdout.columns;
    },
    get closed() {
      return closed || stdout.destroyed;
    },
    write: (text) => (closed ? true : stdout.write(text)),
    // A closed pipe never drains: wake the writer up when it closes too.
    once: (event, listener) => {
      let called = false;
      const once = () => {
        if (called) return;
        called = true;
        stdout.off('drain', once);
        stdout.off('close', once);
        listener();
      };
      stdout.once(event, once);
      stdout.once('close', once);
    },
  };
}

/** The streams of the program a command belongs to (the process streams when it was not built by {@link buildProgram}). */
export function ioOf(command: Command): CliIo {
  let root: Command = command;
  while (root.parent) root = root.parent;
  return ioByProgram.get(root) ?? { stdout: process.stdout, stderr: process.stderr, trapSignals: true };
}

/**
 * Runs the program on `argv` (as `process.argv`: node, script, then the
 * arguments) and resolves its exit code: 0 on success, 2 for a usage error
 * (unknown command or option, missing argument, bad value, {@link UsageError}),
 * 130 when interrupted ({@link InterruptedError}), 3 when entries were held
 * by another reader ({@link IncompleteError}), 1 for anything else that
 * went wrong at run time. The message has been written
 * to stderr by then. A command that sets `process.exitCode` itself keeps it.
 */
export async function runProgram(program: Command, argv: readonly string[]): Promise<number> {
  try {
    await program.parseAsync([...argv]);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has printed its own message (or the help) already.
      return error.exitCode === 0 ? 0 : 2;
    }
    ioOf(program).stderr.write(`redeliver: ${redactCredentials(error instanceof Error ? error.message : String(error))}\n`);
    if (error instanceof UsageError) return 2;
    if (error instanceof IncompleteError) return 3;
    return error instanceof InterruptedError ? 130 : 1;
  }
}
