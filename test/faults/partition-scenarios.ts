/**
 * The partition scenarios: a three-node cluster on the suite's own network
 * (see network/), cut apart while messages flow. Each partition kind runs
 * once in a scenario of its own, then a seeded schedule runs several in a
 * row. Throughout, a producer sends (a second one starts as the cut does,
 * so sends meet the partition), two workers in two client namespaces handle
 * with the default failure mix (immediate retries, delayed retries,
 * dead-letters), and every handler run is recorded for the one-holder check.
 * Run only when named: `npm run faults -- partition`.
 */
import { seededRandom } from '../../src/time/random.js';
import { WORKER_LEASE_MS, type ScenarioContext } from './context.js';
import { PARTITION_KINDS, partitionSchedule, runPartition, type PartitionKind } from './network/partitions.js';
import type { Scenario } from './scenarios.js';

/** The adapters (transport names) with nodes on the suite's network. */
export const PARTITION_TRANSPORTS = ['jetstream-3-netns', 'rabbitmq-3-netns', 'redis-sentinel-netns-w0', 'redis-sentinel-netns-w1', 'redis-cluster-netns-w0', 'redis-cluster-netns-w1', 'nsq-netns', 'rocketmq-netns'];
/** How long one partition lasts in the per-kind scenarios; client-past-lease's lasts three leases (see cutOf). */
const CUT_MS = 6_000;
/** Steps of the seeded schedule. */
const SCHEDULE_STEPS = 3;

const TITLES: Record<PartitionKind, string> = {
  'isolate-leader': 'the work queue leader isolated from every node and client, both ways, for 6 s',
  'isolate-follower': 'one follower isolated from everything, both ways, for 6 s',
  'one-way-leader': "the leader's packets dropped (it still hears everyone) for 6 s",
  'split-clients-minority': 'split: leader, producer and worker-1 against the other two nodes and worker-2, for 6 s',
  'flapping-leader': "the leader's link slow and lossy, cut and healed again and again, for 6 s",
  'client-past-lease': "worker-1's client member (and the producer's) cut from every node for three times the workers' lease (6 s; 30 s on RocketMQ, whose proxy raises the lease to 10 s): its messages go to worker-2, its settlements come late",
};

/** The workload: at most 400 messages, slower handlers (up to 200 ms), so work is in flight through the cut; 1 s delayed-retry steps. */
function workload(messages: number) {
  return { messages: Math.min(messages, 400), workMs: 200, delayStepMs: 1_000, holds: true };
}

/**
 * Starts two workers (which make the queues), runs `beforeTraffic`, then
 * starts the first `sends` sends; resolves with what `beforeTraffic`
 * resolved once 40 % of those sends are handled.
 */
async function startFlow<T>(context: ScenarioContext, sends: number, beforeTraffic: () => Promise<T>): Promise<T> {
  await context.startWorker();
  await context.startWorker();
  const placed = await beforeTraffic();
  context.startProducer(0, sends);
  const target = Math.ceil(sends * 0.4);
  await context.waitUntil(`${target} handled`, 3 * 60_000, () => context.handledCount() >= target);
  return placed;
}

/** How long `kind` cuts in its own scenario: client-past-lease three of the workers' leases, so it outlasts one; every other kind {@link CUT_MS}. */
function cutOf(kind: PartitionKind, context: ScenarioContext): number {
  return kind === 'client-past-lease' ? 3 * (context.adapter.leaseMs ?? WORKER_LEASE_MS) : CUT_MS;
}

function kindScenario(kind: PartitionKind): Scenario {
  return {
    name: `partition-${kind}`,
    title: TITLES[kind],
    only: PARTITION_TRANSPORTS,
    workload,
    drainWaitsForDelayed: true,
    async run(context) {
      const { messages } = context.workload;
      const half = Math.floor(messages / 2);
      const partitions = context.adapter.partitions!;
      const roles = await startFlow(context, half, () => partitions.roles(context.scope));
      context.startProducer(half, messages);
      const done = await runPartition(partitions.nemesis, { kind, cutMs: cutOf(kind, context), healedMs: 0 }, roles, seededRandom(context.seed));
      context.faultDone(`${done}, healed at ${context.handledCount()} handled`);
    },
  };
}

export const PARTITION_SCENARIOS: readonly Scenario[] = [
  ...PARTITION_KINDS.map(kindScenario),
  {
    name: 'partition-schedule',
    title: `a seeded schedule of ${SCHEDULE_STEPS} partitions in a row (replay with the same --seed)`,
    only: PARTITION_TRANSPORTS,
    workload,
    drainWaitsForDelayed: true,
    async run(context) {
      const schedule = partitionSchedule(context.seed, SCHEDULE_STEPS);
      context.note(`schedule (seed ${context.seed}): ${JSON.stringify(schedule)}`);
      const { messages } = context.workload;
      // A slice of the sends starts with each partition.
      const slice = Math.floor(messages / (SCHEDULE_STEPS + 1));
      await startFlow(context, slice, async () => undefined);
      const partitions = context.adapter.partitions!;
      const random = seededRandom(context.seed);
      for (const [i, step] of schedule.entries()) {
        const roles = await partitions.roles(context.scope);
        context.startProducer(slice * (i + 1), i === SCHEDULE_STEPS - 1 ? messages : slice * (i + 2));
        const done = await runPartition(partitions.nemesis, step, roles, random);
        context.faultDone(`step ${i + 1}, ${step.kind}: ${done}`);
        if (i < SCHEDULE_STEPS - 1) await new Promise((r) => setTimeout(r, step.healedMs));
      }
    },
  },
];
