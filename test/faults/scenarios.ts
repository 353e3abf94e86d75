/**
 * The fault scenarios, one list for every transport. Each starts its
 * workers and producer, injects its fault, and returns with the workers
 * running; the runner then lets everything drain and counts the evidence.
 * A scenario a transport cannot have is skipped with the adapter's reason.
 */
import { writeFileSync } from 'node:fs';
import type { ScopeOptions } from './adapters/types.js';
import type { ScenarioContext, Workload } from './context.js';
import { behaviourOf } from './failure-mix.js';
import { Child } from './processes.js';
import { settlementFailures } from './settlement-rate.js';

/** One fault scenario. */
export interface Scenario {
  readonly name: string;
  /** What it does, for the report. */
  readonly title: string;
  /** Its workload, given the run's base message count. */
  workload(messages: number): Workload;
  /** The transports (adapter names) it runs on. Default every one whose adapter gives no skip reason. */
  readonly only?: readonly string[];
  /** The confirmed ids the checker counts. Default every one. */
  counted?(context: ScenarioContext): string[];
  /** Scope options (e.g. a bounded error queue). */
  readonly scopeOptions?: ScopeOptions;
  /** Starts processes and injects the fault. */
  run(context: ScenarioContext): Promise<void>;
  /**
   * The adapter method the fault needs: on a transport whose adapter lacks
   * it, the scenario is skipped with {@link Scenario.absentReason}.
   */
  readonly needs?: 'killNameServer' | 'killProxy' | 'killOneBroker' | 'failover';
  /** Why the scenario does not apply where `needs` is missing. */
  readonly absentReason?: string;
  /**
   * When the run has drained. Default: every confirmed id handled or in the
   * error queue.
   */
  drained?(context: ScenarioContext, confirmed: ReadonlySet<string>): Promise<boolean>;
  /**
   * Whether the default drain also waits, while ids are open, until no
   * delayed retry is waiting: a cut can leave the error queue holding one
   * message twice (its dead-letter's ack lost, the copy written again), so
   * its entries outnumber the messages in it while retries are still due.
   * Default false.
   */
  readonly drainWaitsForDelayed?: boolean;
}

const MINUTE = 60_000;

/** Waits until `share` of the workload's messages were handled. */
function handledShare(context: ScenarioContext, share: number): Promise<void> {
  const target = Math.ceil(context.workload.messages * share);
  return context.waitUntil(`${target} handled`, 3 * MINUTE, () => context.handledCount() >= target);
}

/** Waits until at least `count` messages wait for a delayed retry; notes it when none is seen in time. */
async function delayedPending(context: ScenarioContext, count: number, timeoutMs = 30_000): Promise<number> {
  let seen = 0;
  const started = Date.now();
  await context
    .waitUntil(`${count} delayed retries pending`, timeoutMs, async () => (seen = await context.scope.delayedCount().catch(() => 0)) >= count)
    .catch(() => context.note(`only ${seen} delayed retries were pending at the fault`));
  context.debug(`${seen} delayed retries pending after ${Date.now() - started} ms`);
  return seen;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'worker-kill',
    title: 'worker kill -9 three times mid-flight, restarted each time',
    workload: (messages) => ({ messages }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      for (const share of [0.2, 0.4, 0.6]) {
        await handledShare(context, share);
        await context.killWorkers();
        context.faultDone(`worker killed -9 at ${context.handledCount()} handled`);
        await context.startWorker();
      }
    },
  },
  {
    name: 'producer-kill',
    title: 'producer kill -9 mid-send-loop: every resolved send is stored',
    workload: (messages) => ({ messages }),
    async run(context) {
      await context.startWorker();
      const producer = context.startProducer();
      const half = Math.ceil(context.workload.messages / 2);
      await context.waitUntil(`${half} sends resolved`, 3 * MINUTE, () => context.confirmed().length >= half || !producer.running);
      await producer.kill9();
      context.faultDone(`producer killed -9 after ${context.confirmed().length} resolved sends`);
    },
  },
  {
    name: 'connection-cut',
    title: 'connections cut three times while handlers run and delayed retries are pending',
    // A cut is a rabbitmqctl call, seconds under load: slower handlers and 5 s delays keep work in flight and pending across all three.
    workload: (messages) => ({ messages, delayStepMs: 5_000, workMs: 40 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      for (const share of [0.2, 0.35, 0.5]) {
        await handledShare(context, share);
        const pending = await delayedPending(context, 1, 10_000);
        // Cut again until a cut finds a connection: after a cut the processes take a moment to reconnect.
        let cut = 0;
        await context.waitUntil('a connection to cut', 30_000, async () => (cut = await context.adapter.cutConnections!(context.scope)) > 0);
        context.faultDone(`${cut} connection(s) cut at ${context.handledCount()} handled, ${pending} delayed retries pending`);
      }
    },
  },
  {
    name: 'broker-restart',
    title: 'broker graceful restart with delayed retries pending',
    workload: (messages) => ({ messages, delayStepMs: 2_000 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.3);
      const pending = await delayedPending(context, 20);
      context.note(`${pending} delayed retries pending at the restart`);
      await context.brokerRestart();
    },
  },
  {
    name: 'broker-kill',
    title: 'broker kill -9 with thousands of delayed retries pending',
    // Every message fails its first round, so it waits 5 s in the delay levels.
    workload: (messages) => ({ messages: Math.max(messages, 3_000), mix: { round: 1 }, delayStepMs: 5_000 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      const pending = await delayedPending(context, 1_000, 2 * MINUTE);
      context.note(`${pending} delayed retries pending at the kill`);
      await context.brokerKill();
    },
  },
  {
    name: 'broker-stall',
    title: 'broker frozen (SIGSTOP) for 10 s with delayed retries pending, then resumed',
    // Longer than the lease, the pull heartbeats and the API timeouts, shorter than the clients' ping interval: nobody disconnects.
    workload: (messages) => ({ messages, delayStepMs: 2_000 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.3);
      const pending = await delayedPending(context, 20);
      await context.adapter.stallBroker!(10_000);
      context.faultDone(`broker frozen for 10 s with ${pending} delayed retries pending, then resumed`);
    },
  },
  {
    name: 'memory-alarm',
    title: 'broker memory alarm during sends, then during settlements',
    workload: (messages) => ({ messages }),
    async run(context) {
      const alarm = context.adapter.memoryAlarm!.bind(context.adapter);
      await context.startWorker();
      const producer = context.startProducer();
      const quarter = Math.ceil(context.workload.messages / 4);
      await context.waitUntil(`${quarter} sends resolved`, 3 * MINUTE, () => context.confirmed().length >= quarter || !producer.running);
      await alarm(true);
      await sleep(3_000);
      await alarm(false);
      context.faultDone(`memory alarm for 3 s during sends (${context.confirmed().length} resolved)`);
      await producer.exited;
      await handledShare(context, 0.5);
      await alarm(true);
      await sleep(3_000);
      await alarm(false);
      context.faultDone(`memory alarm for 3 s during settlements (${context.handledCount()} handled)`);
    },
  },
  {
    name: 'cli-retry-kill',
    title: '`redeliver errors retry` killed -9 midway, then run again',
    workload: (messages) => ({ messages: Math.min(messages, 1_000), mix: { 'until-replayed': 1 }, delayStepMs: 200 }),
    async run(context) {
      await context.startWorker();
      const producer = context.startProducer();
      await producer.exited;
      const confirmed = context.confirmed().length;
      await context.waitUntil(`${confirmed} in the error queue`, 3 * MINUTE, async () => (await context.scope.errorCount()) >= confirmed);
      const retry = () =>
        Child.start(
          'cli',
          'src/cli/main.ts',
          ['errors', 'retry', context.scope.cliTarget, '--all', '--error-queue', context.scope.errorQueue],
          `${context.dir}/cli.out`,
          context.scope.cliEnv,
        );
      const first = retry();
      // Killed once it has sent some back: a message handled again, or a tenth gone from the error queue (fast on SQLite).
      let left = confirmed;
      await context.waitUntil(
        'the CLI to send some back',
        3 * MINUTE,
        async () => context.handledCount() > 0 || (left = await context.scope.errorCount()) < confirmed * 0.9 || !first.running,
        10,
      );
      if (!first.running) context.note(`the first CLI run finished (code ${first.code}) before the kill`);
      await first.kill9();
      context.faultDone(`CLI killed -9 with ${context.handledCount()} handled again, ${left} of ${confirmed} in the error queue`);
      const second = retry();
      // Recovery counts from the kill: the second run is part of it.
      const code = await second.exited;
      if (code !== 0) context.note(`the second CLI run exited with code ${code}`);
    },
  },
  {
    name: 'queue-deleted',
    title: 'error queue, then work queue deleted under a running endpoint',
    workload: (messages) => ({ messages, delayStepMs: 2_000 }),
    async run(context) {
      const { adapter, scope } = context;
      const half = Math.floor(context.workload.messages / 2);
      await context.startWorker();
      await adapter.deleteQueueIfEmpty!(scope.errorQueue);
      context.faultDone('error queue deleted (empty)');
      // One producer process throughout: its connection declared the queue before the deletion.
      const resume = `${context.dir}/producer-resume`;
      const producer = context.startProducer(0, context.workload.messages, { at: half, file: resume });
      await context.waitUntil(`${half} sends resolved`, 3 * MINUTE, () => context.confirmed().length >= half || !producer.running);
      // The work queue, deleted once it is empty while delayed retries are out in the delay levels.
      await delayedPending(context, 1, 10_000);
      await context.waitUntil('the work queue deleted while empty', MINUTE, () => adapter.deleteQueueIfEmpty!(scope.queue));
      context.faultDone(`work queue deleted (empty) with ${await scope.delayedCount()} delayed retries pending`);
      writeFileSync(resume, '');
      await producer.exited;
    },
  },
  {
    name: 'error-queue-full',
    title: 'a full error queue (x-max-length 20, reject-publish)',
    workload: (messages) => ({ messages }),
    scopeOptions: { errorQueueMaxLength: 20 },
    async run(context) {
      context.startProducer();
      await context.startWorker();
      context.faultDone('error queue bounded to 20 from the start');
    },
    async drained(context, confirmed) {
      // The error queue cannot take every failing message: drained when every other one is handled and it is full.
      const handled = new Set(context.handled());
      const { mix } = context.workload;
      const open = [...confirmed].filter((id) => !handled.has(id) && behaviourOf(id, mix, context.seed) !== 'always');
      if (open.length > 0 || (await context.scope.errorCount()) < 20 || (await context.scope.delayedCount()) > 0) return false;
      // The cheap count misses a copy mid-hop between two quorum delay levels; the exact one counts it.
      const { scope } = context;
      return (await (scope.delayedCountExact ?? scope.delayedCount).call(scope)) === 0;
    },
  },
  {
    name: 'settlement-refused',
    title: 'the broker refuses the copies settlements write for 10 s, then takes them again',
    // A fifth of the messages end in the error queue, so dead-letters are under way throughout the refusal.
    workload: (messages) => ({ messages, mix: { once: 0.1, round: 0.1, always: 0.2 }, delayStepMs: 1_000 }),
    async run(context) {
      const { adapter, scope } = context;
      await context.startWorker();
      const producer = context.startProducer();
      // Sends are writes too: the refusal starts once they are all stored.
      await producer.exited;
      await adapter.refuseSettlements!(scope, true);
      await sleep(10_000);
      await adapter.refuseSettlements!(scope, false);
      context.faultDone(`settlement copies refused for 10 s from ${context.handledCount()} handled`);
      // A delivery whose settlement is refused is tried again after 1 s, then 1.6 s, 2.56 s...: at most two attempts a second per delivery held.
      const { attempts, peakPerSecond, gone } = settlementFailures(context.workerOutputs());
      const bound = 2 * context.concurrency;
      context.note(`${attempts} settlement attempts refused, at most ${peakPerSecond} in one second (bound ${bound}); ${gone} found their delivery gone`);
      if (attempts === 0) throw new Error('the refusal refused no settlement');
      if (peakPerSecond > bound) throw new Error(`settlements tried in a hot loop: ${peakPerSecond} refused in one second`);
    },
  },
  {
    name: 'cluster-leader-kill',
    title: 'three-node quorum cluster: kill -9 the work queue leader mid-run, bring it back',
    workload: (messages) => ({ messages }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.3);
      const bringBack = await context.adapter.killQueueLeader!(context.scope);
      context.faultDone('work queue leader killed -9');
      await sleep(5_000);
      await bringBack();
      context.faultDone('old leader started again');
    },
  },
  {
    name: 'nsqd-kill-with-lookupd',
    title: 'two nsqd found through nsqlookupd: one killed -9 mid-run, the consumer keeps handling the other one\'s messages',
    only: ['nsq'],
    workload: (messages) => ({ messages }),
    scopeOptions: { discovery: true },
    async run(context) {
      const half = Math.floor(context.workload.messages / 2);
      await context.startWorker();
      context.startProducer(0, half, undefined, 1);
      const survivor = context.startProducer(half, context.workload.messages, undefined, 2);
      await handledShare(context, 0.2);
      const bringBack = await context.adapter.killNode!(1);
      context.faultDone(`nsqd 1 killed -9 at ${context.handledCount()} handled`);
      await survivor.exited;
      // Everything the survivor confirmed is handled or dead-lettered while nsqd 1 is down.
      await context.waitUntil("nsqd 2's messages handled with nsqd 1 down", 3 * MINUTE, () => this.drained!(context, new Set(this.counted!(context))));
      context.faultDone(`nsqd 2's ${this.counted!(context).length} confirmed messages handled or dead-lettered with nsqd 1 down`);
      await bringBack();
      const handled = new Set(context.handled());
      const lostWithNode = context.confirmed().filter((id) => Number(id.slice(2)) < half && !handled.has(id)).length;
      context.note(`${lostWithNode} of the messages nsqd 1 confirmed not handled when it came back (its memory queue, in-flight and deferred messages die with it)`);
    },
    counted(context) {
      // Only the survivor's messages: what nsqd 1 held in memory died with it, by design.
      const half = Math.floor(context.workload.messages / 2);
      return context.confirmed().filter((id) => Number(id.slice(2)) >= half);
    },
    async drained(context, confirmed) {
      const handled = new Set(context.handled());
      const open = [...confirmed].filter((id) => !handled.has(id)).length;
      return open === 0 || open <= (await context.scope.errorCount().catch(() => -1));
    },
  },
  {
    name: 'name-server-kill',
    title: 'name server kill -9 for 15 s with delayed retries pending, then started again',
    needs: 'killNameServer',
    absentReason: 'no name server: a RocketMQ role',
    workload: (messages) => ({ messages, delayStepMs: 2_000 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.3);
      const pending = await delayedPending(context, 20);
      const before = context.handledCount();
      await context.adapter.killNameServer!(15_000);
      context.faultDone(`name server killed -9 with ${pending} delayed retries pending, ${context.handledCount() - before} handled while it was down, started again`);
    },
  },
  {
    name: 'proxy-kill',
    title: 'proxy kill -9 with the brokers alive, 5 s down, delayed retries pending, then started again',
    needs: 'killProxy',
    absentReason: 'no proxy apart from the broker: a RocketMQ role',
    workload: (messages) => ({ messages, delayStepMs: 2_000 }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.3);
      const pending = await delayedPending(context, 20);
      await context.adapter.killProxy!(5_000);
      context.faultDone(`proxy killed -9 with ${pending} delayed retries pending, started again`);
    },
  },
  {
    name: 'broker-scale-out',
    title: "one of two brokers killed -9 mid-run: the other broker's queues are handled on, then the killed one comes back",
    needs: 'killOneBroker',
    absentReason: "no second broker holding part of a queue: RocketMQ's layout",
    workload: (messages) => ({ messages: Math.max(messages, 3_000) }),
    async run(context) {
      context.startProducer();
      await context.startWorker();
      await handledShare(context, 0.2);
      const bringBack = await context.adapter.killOneBroker!(context.scope);
      context.faultDone('broker-b killed -9');
      const before = context.handledCount();
      const more = Math.ceil(context.workload.messages * 0.05);
      await context
        .waitUntil(`${more} more handled on broker-a`, MINUTE, () => context.handledCount() >= before + more)
        .then(() => context.note(`${context.handledCount() - before} handled with broker-b down`))
        .catch(() => context.note(`only ${context.handledCount() - before} handled with broker-b down (wanted ${more})`));
      await bringBack();
      context.faultDone('broker-b started again');
    },
  },
  {
    name: 'failover',
    title: 'primary kill -9 while sends, retries and error-queue moves flow: a replica takes over, the consumer follows (aimed at within 10 s)',
    needs: 'failover',
    absentReason: 'no primary with replicas to fail over: a Redis set-up',
    // Short delays: retries and dead-letters flow from the first half while the second half is sent.
    workload: (messages) => ({ messages: Math.max(messages, 3_000), delayStepMs: 200 }),
    async run(context) {
      const { messages } = context.workload;
      const half = Math.floor(messages / 2);
      await context.startWorker();
      context.startProducer(0, half);
      await context.waitUntil('error-queue moves under way', 3 * MINUTE, async () => (await context.scope.errorCount()) >= 10);
      const producer = context.startProducer(half, messages);
      const target = half + Math.ceil(messages * 0.1);
      await context.waitUntil('the second half being sent', 3 * MINUTE, () => context.confirmed().length >= target || !producer.running);
      const pending = await delayedPending(context, 1, 5_000);
      const errored = await context.scope.errorCount();
      const [sending, confirmed, handled] = [producer.running, context.confirmed().length, context.handledCount()];
      const killedAt = Date.now();
      const { what, bringBack } = await context.adapter.failover!(context.scope);
      context.faultDone(
        `${what}; at the kill ${confirmed} sends confirmed${sending ? ' (producer still sending)' : ''}, ${handled} handled, ${pending} delayed retries pending, ${errored} in the error queue`,
      );
      // Handlers running at the kill finish at once: a handling after the promotion is one read from the new primary.
      const atPromotion = context.handledCount();
      await context.waitUntil('a message handled after the promotion', 30_000, () => context.handledCount() > atPromotion);
      const seconds = (Date.now() - killedAt) / 1000;
      // A figure, not a verdict: how soon depends on the shared machine's load as much as on the client.
      context.note(`the consumer handled again ${seconds.toFixed(1)} s after the kill${seconds > 10 ? ' (more than the 10 s aimed at)' : ''}`);
      if (bringBack) context.faultDone(await bringBack());
    },
  },
];
