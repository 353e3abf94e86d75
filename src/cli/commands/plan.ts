import { InvalidArgumentError, Option, type Command } from 'commander';
import { OptionError } from '../../util/option-checks.js';
import { ALL_TARGETS, findConflicts, NSQD_MAX_MSG_TIMEOUT_MS, planNotes, RABBITMQ_CONSUMER_TIMEOUT_MS, ROCKETMQ_MAX_RECONSUME_TIMES, type PlanTarget } from '../../planning/conflicts.js';
import { planPolicy } from '../../planning/plan.js';
import { planChart, planReport, planText } from '../plan-report.js';
import { ioOf } from '../program.js';
import { UsageError } from '../open-transport.js';
import { addPolicyOptions, count, durationFlag, policyInput, positiveCount, type PolicyFlags } from '../policy-options.js';
import { addChartOptions, deliverChart, type ChartFlags } from '../chart-output.js';
import { formatDuration } from '../../planning/duration-text.js';

interface PlanFlags extends PolicyFlags, ChartFlags {
  handlerMs?: number;
  queueDepth?: number;
  transport: 'all' | PlanTarget['transport'];
  queueType: 'classic' | 'quorum';
  rabbitmqVersion: number;
  deliveryLimit?: number;
  consumerTimeout: number;
  maxDeliver?: number;
  maxMsgTimeout: number;
  maxReconsumeTimes: number;
  draws: number;
  seed: number;
  json?: boolean;
}

export function registerPlan(program: Command): void {
  const command = program
    .command('plan')
    .description('show what a retry policy does to a message that keeps failing: every attempt and when it runs, the time to the error queue, and the broker limits that cut it short')
    .argument('[module]', 'a policy module: a .js, .mjs or (with tsx installed) .ts file whose default export is the options an Endpoint takes');
  addPolicyOptions(command)
    .option('--handler-ms <duration>', 'how long one handler attempt takes (milliseconds, or 2s, 5m)', durationFlag)
    .option('--queue-depth <count>', 'with --handler-ms: the worker time a queue of this many failing messages takes', positiveCount)
    .addOption(new Option('--transport <name>', 'the broker to check the policy against').choices(['all', ...ALL_TARGETS.map((t) => t.transport)]).default('all'))
    .addOption(new Option('--queue-type <type>', 'rabbitmq: the work queue type').choices(['classic', 'quorum']).default('classic'))
    .option('--rabbitmq-version <major>', 'rabbitmq: the broker major version (4 and later give quorum queues a delivery limit of 20)', positiveCount, 4)
    .option('--delivery-limit <count>', "rabbitmq: the work queue's x-delivery-limit (default: 20 on quorum queues of RabbitMQ 4, none otherwise)", count)
    .option('--consumer-timeout <duration>', "rabbitmq: the broker's consumer_timeout", durationFlag, RABBITMQ_CONSUMER_TIMEOUT_MS)
    .option('--max-deliver <count>', "jetstream: the work consumer's max_deliver (default -1, none, as the transport creates it)", integer)
    .option('--max-msg-timeout <duration>', "nsq: nsqd's --max-msg-timeout, the longest lease it gives", durationFlag, NSQD_MAX_MSG_TIMEOUT_MS)
    .option('--max-reconsume-times <count>', "rocketmq: the consumer group's retryMaxTimes", count, ROCKETMQ_MAX_RECONSUME_TIMES)
    .option('--draws <count>', 'seeded draws of the jittered schedule', positiveCount, 1000)
    .option('--seed <number>', 'seed of the first draw', count, 1)
    .option('--json', 'print one JSON object instead of the table');
  addChartOptions(command, 'a chart of the time from the first attempt to each attempt')
    .action(async (moduleFile: string | undefined, flags: PlanFlags, cmd: Command) => {
      const io = ioOf(cmd);
      const input = await policyInput(moduleFile, flags);
      let plan;
      try {
        plan = planPolicy(input, { draws: flags.draws, seed: flags.seed, handlerMs: flags.handlerMs, queueDepth: flags.queueDepth });
      } catch (error) {
        if (error instanceof OptionError) throw new UsageError(error.message);
        throw error;
      }
      if (flags.queueDepth !== undefined && flags.handlerMs === undefined) throw new UsageError('--queue-depth needs --handler-ms');
      const targets = planTargets(flags);
      const conflicts = findConflicts(plan, input, targets);
      const notes = planNotes(plan, targets);
      const title = `Retry plan: ${plan.attempts.max} attempts, longest ${formatDuration(plan.toErrorQueueMs.p100)} to the error queue`;
      const chartLines = await deliverChart(title, () => planChart(plan, title), flags, io);
      if (flags.json) {
        io.stdout.write(`${JSON.stringify(planReport(plan, conflicts, notes))}\n`);
        for (const line of chartLines) io.stderr.write(`${line}\n`);
      } else io.stdout.write(planText(plan, conflicts, notes, targets) + chartLines.map((line) => `${line}\n`).join(''));
    });
}

function planTargets(flags: PlanFlags): readonly PlanTarget[] {
  const rabbitmq: PlanTarget = {
    transport: 'rabbitmq',
    queueType: flags.queueType,
    brokerMajor: flags.rabbitmqVersion,
    consumerTimeoutMs: flags.consumerTimeout,
    ...(flags.deliveryLimit === undefined ? {} : { deliveryLimit: flags.deliveryLimit }),
  };
  const jetstream: PlanTarget = { transport: 'jetstream', ...(flags.maxDeliver === undefined ? {} : { maxDeliver: flags.maxDeliver }) };
  const configured: Partial<Record<PlanTarget['transport'], PlanTarget>> = {
    rabbitmq,
    jetstream,
    nsq: { transport: 'nsq', maxMsgTimeoutMs: flags.maxMsgTimeout },
    rocketmq: { transport: 'rocketmq', maxReconsumeTimes: flags.maxReconsumeTimes },
  };
  const chosen = ALL_TARGETS.map((t) => configured[t.transport] ?? t);
  return flags.transport === 'all' ? chosen : chosen.filter((t) => t.transport === flags.transport);
}

function integer(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n)) throw new InvalidArgumentError('expected a whole number');
  return n;
}
