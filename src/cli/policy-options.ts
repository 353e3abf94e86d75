import { InvalidArgumentError, type Command } from 'commander';
import { BACKOFF_EXPRESSION_HELP, BackoffExpressionError, parseBackoffExpression } from '../planning/backoff-expression.js';
import { parseDuration } from '../planning/duration-text.js';
import { loadPolicyModule, PolicyModuleError, type PolicyInput } from '../planning/policy-module.js';
import type { Backoff } from '../backoff/types.js';
import { UsageError } from './open-transport.js';

/** The flags {@link addPolicyOptions} adds, as commander parses them. */
export interface PolicyFlags {
  immediate?: number;
  delayed?: number;
  backoff?: Backoff;
  maxDelay?: number;
  deadline?: number;
  concurrency?: number;
  lease?: number;
  consumerBackoff?: boolean;
  rateLimit?: number;
  rateLimitWait?: number;
  retryBudget?: boolean;
}

/**
 * Adds the flags that describe an endpoint's policy, each overriding the
 * same setting of a policy module: retries, backoff, the delay cap, the
 * deadline, concurrency, lease and flow control.
 */
export function addPolicyOptions(command: Command): Command {
  return command
    .option('--immediate <count>', 'immediate retries per round (endpoint default 5)', count)
    .option('--delayed <count>', 'delayed retries (endpoint default 3)', count)
    .option('--backoff <expression>', `delayed-retry backoff (endpoint default "linear(10s)"): ${BACKOFF_EXPRESSION_HELP}`, backoff)
    .option('--max-delay <duration>', 'longest delay between two delayed retries (endpoint default 24h)', durationFlag)
    .option('--deadline <duration>', 'deadline counted from the first attempt: no retry comes back at or after it (endpoint default none)', positiveDuration)
    .option('--concurrency <count>', 'messages handled at once (endpoint default 10)', positiveCount)
    .option('--lease <duration>', 'how long a delivery is leased, on transports that lease (endpoint default 30s)', durationFlag)
    .option('--consumer-backoff', 'turn on NSQ consumer backoff with its defaults')
    .option('--rate-limit <failures>', 'turn on rate limiting after this many consecutive failures', positiveCount)
    .option('--rate-limit-wait <duration>', 'wait between attempts while rate limited (default 5s)', durationFlag)
    .option('--retry-budget', 'turn on the retry budget with its defaults');
}

/**
 * The policy to plan or simulate: the module's options (when a module is
 * given), with every flag given on the command line taking precedence.
 * Throws a {@link UsageError} for a module that cannot be loaded.
 */
export async function policyInput(moduleFile: string | undefined, flags: PolicyFlags): Promise<PolicyInput> {
  let base: PolicyInput = {};
  if (moduleFile !== undefined) {
    try {
      base = await loadPolicyModule(moduleFile);
    } catch (error) {
      if (error instanceof PolicyModuleError) throw new UsageError(error.message);
      throw error;
    }
  }
  const recoverability = { ...base.recoverability };
  if (flags.immediate !== undefined) recoverability.immediateRetries = flags.immediate;
  if (flags.delayed !== undefined) recoverability.delayedRetries = flags.delayed;
  if (flags.backoff !== undefined) recoverability.delayedBackoff = flags.backoff;
  if (flags.maxDelay !== undefined) recoverability.maxDelayMs = flags.maxDelay;
  if (flags.deadline !== undefined) recoverability.deadlineMs = flags.deadline;
  const flowControl = { ...base.flowControl };
  if (flags.consumerBackoff) flowControl.consumerBackoff = true;
  if (flags.rateLimit !== undefined) flowControl.rateLimit = { consecutiveFailures: flags.rateLimit, ...(flags.rateLimitWait === undefined ? {} : { waitMs: flags.rateLimitWait }) };
  else if (flags.rateLimitWait !== undefined) throw new UsageError('--rate-limit-wait needs --rate-limit');
  if (flags.retryBudget) flowControl.retryBudget = true;
  return {
    recoverability,
    flowControl,
    concurrency: flags.concurrency ?? base.concurrency,
    leaseMs: flags.lease ?? base.leaseMs,
  };
}

/** Parses a whole number of at least 0. */
export function count(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number of at least 0');
  return n;
}

/** Parses a whole number of at least 1. */
export function positiveCount(value: string): number {
  const n = count(value);
  if (n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

/** Parses a duration flag: milliseconds, or a number with a unit (250ms, 10s, 5m, 24h). */
export function durationFlag(value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new InvalidArgumentError('expected a duration: milliseconds, or a number with ms, s, m, h or d (such as 1500, 10s, 24h)');
  return ms;
}

function positiveDuration(value: string): number {
  const ms = durationFlag(value);
  if (ms < 1) throw new InvalidArgumentError('expected a duration of at least 1 ms');
  return ms;
}

function backoff(value: string): Backoff {
  try {
    return parseBackoffExpression(value);
  } catch (error) {
    if (error instanceof BackoffExpressionError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}
