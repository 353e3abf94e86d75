/**
 * The fault-injection suite: every scenario on every transport it applies
 * to, each on brokers of its own, counted from durable evidence. Prints a
 * row per scenario, the elapsed time, and one JSON line; exits 1 when any
 * scenario lost a message or could not run (on NSQ, lost more than the bare
 * nsqjs client beside it in the same run; a Redis failover with
 * `waitReplicas` 0 reports its loss without failing).
 *
 * Usage: `npm run faults -- --help`.
 *
 * The partition scenarios (partition-scenarios.ts) run only when named,
 * one by one or all of them as `partition`; they need root and iproute2.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JetStreamFaultAdapter } from './adapters/jetstream.js';
import { NsqFaultAdapter } from './adapters/nsq.js';
import { RabbitMqFaultAdapter } from './adapters/rabbitmq.js';
import { RedisFaultAdapter } from './adapters/redis.js';
import { RocketMqFaultAdapter } from './adapters/rocketmq.js';
import { SqliteFaultAdapter } from './adapters/sqlite.js';
import type { FaultAdapter } from './adapters/types.js';
import { formatRow, jsonLine } from './report.js';
import { holdsFailure, pairedHolds, rowFailure, rowStall, runScenario, skipReasonOf, type ScenarioResult } from './run.js';
import { networkUnavailableReason } from './network/ip.js';
import { PARTITION_SCENARIOS, PARTITION_TRANSPORTS } from './partition-scenarios.js';
import { SCENARIOS, type Scenario } from './scenarios.js';

const USAGE = `Usage: npm run faults -- [scenario ...] [--transport sqlite|rabbitmq|redis|redis-cluster|jetstream|nsq|rocketmq|all] [--messages N] [--seed N] [--keep]

  scenario     a scenario's name, or partition for every partition-* one (default: every scenario but the partition ones)
  --transport  the transport to run on (default all); redis-cluster: only redis's Redis Cluster set-ups
  --messages   messages per scenario, a whole number >= 10 (default 2000)
  --seed       seed of the failure mix and of partition schedules (default 1)
  --keep       keep the evidence directory (removed after the run otherwise)`;

/** Prints `problem` and the usage to stderr and exits 2: a bad command line, not a failed scenario. */
function usageError(problem: string): never {
  console.error(`faults: ${problem}\n\n${USAGE}`);
  process.exit(2);
}

function parseCommandLine() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        transport: { type: 'string', default: 'all' },
        messages: { type: 'string', default: '2000' },
        seed: { type: 'string', default: '1' },
        keep: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    return usageError((error as Error).message);
  }
}

const { values, positionals } = parseCommandLine();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const messages = Number(values.messages);
const seed = Number(values.seed);
if (!Number.isInteger(messages) || messages < 10) usageError(`--messages must be a whole number >= 10, got ${values.messages}`);
if (!Number.isInteger(seed)) usageError(`--seed must be a whole number, got ${values.seed}`);
const ALL = [...SCENARIOS, ...PARTITION_SCENARIOS];
const named = (s: Scenario) => positionals.includes(s.name) || (positionals.includes('partition') && PARTITION_SCENARIOS.includes(s));
const unknown = positionals.filter((name) => name !== 'partition' && !ALL.some((s) => s.name === name));
if (unknown.length > 0) usageError(`unknown scenario(s) ${unknown.join(', ')}; known: ${ALL.map((s) => s.name).join(', ')}, and partition for every partition-* one`);
const scenarios = positionals.length > 0 ? ALL.filter(named) : SCENARIOS;
const partitions = scenarios.filter((s) => PARTITION_SCENARIOS.includes(s));
if (!['all', 'sqlite', 'rabbitmq', 'redis', 'redis-cluster', 'jetstream', 'nsq', 'rocketmq'].includes(values.transport!)) usageError(`--transport must be sqlite, rabbitmq, redis, redis-cluster, jetstream, nsq, rocketmq or all, got ${values.transport}`);

const started = Date.now();
const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`);
const dir = mkdtempSync(join(tmpdir(), 'redeliver-faults-'));

const wanted = (transport: string) => values.transport === 'all' || values.transport === transport;
/** `redis-cluster` selects the Redis Cluster set-ups of `redis` alone. */
const clusterOnly = values.transport === 'redis-cluster';
/** Whether the run's --transport selects the adapter named `name` (e.g. `redis-cluster-netns-w0`). */
const selects = (name: string) => values.transport === 'all' || name === values.transport || name.startsWith(`${values.transport}-`);
const adapters: (() => FaultAdapter)[] = [];
if (wanted('sqlite')) adapters.push(() => new SqliteFaultAdapter());
if (wanted('rabbitmq')) {
  adapters.push(() => new RabbitMqFaultAdapter({ log }));
  if (scenarios.some((s) => s.name === 'cluster-leader-kill')) adapters.push(() => new RabbitMqFaultAdapter({ nodes: 3, log }));
  if (partitions.length > 0 && !networkUnavailableReason()) adapters.push(() => new RabbitMqFaultAdapter({ nodes: 3, network: true, log }));
}
if (wanted('redis') || clusterOnly) {
  if (!clusterOnly) adapters.push(() => new RedisFaultAdapter({ log }));
  // The failover, on a primary with two replicas and three Sentinels, and on a cluster, without and with waitReplicas.
  if (scenarios.some((s) => s.name === 'failover')) {
    if (!clusterOnly) {
      adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'sentinel', waitReplicas: 0, basePort: 7220 }, log }));
      adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'sentinel', waitReplicas: 1, basePort: 7230 }, log }));
    }
    adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'cluster', waitReplicas: 0, basePort: 7260 }, log }));
    adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'cluster', waitReplicas: 1, basePort: 7260 }, log }));
  }
  // The partitions, on a primary with two replicas and three Sentinels, and on a cluster of three primaries with a replica each, in namespaces of their own, without and with waitReplicas.
  if (partitions.length > 0 && !networkUnavailableReason()) {
    if (!clusterOnly) {
      adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'sentinel', network: true, waitReplicas: 0, basePort: 7220 }, log }));
      adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'sentinel', network: true, waitReplicas: 1, basePort: 7220 }, log }));
    }
    adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'cluster', network: true, waitReplicas: 0, basePort: 7260 }, log }));
    adapters.push(() => new RedisFaultAdapter({ failover: { setup: 'cluster', network: true, waitReplicas: 1, basePort: 7260 }, log }));
  }
}
if (wanted('jetstream')) {
  adapters.push(() => new JetStreamFaultAdapter({ log }));
  if (scenarios.some((s) => s.name === 'cluster-leader-kill')) adapters.push(() => new JetStreamFaultAdapter({ nodes: 3, log }));
  if (partitions.length > 0 && !networkUnavailableReason()) adapters.push(() => new JetStreamFaultAdapter({ nodes: 3, network: true, log }));
}
if (wanted('nsq')) {
  adapters.push(() => new NsqFaultAdapter({ log }));
  // The broker kill again on nsqd with --mem-queue-size=0: every message on disk as it arrives.
  if (scenarios.some((s) => s.name === 'broker-kill')) adapters.push(() => new NsqFaultAdapter({ memQueueSize: 0, log }));
  if (partitions.length > 0 && !networkUnavailableReason()) adapters.push(() => new NsqFaultAdapter({ network: true, log }));
}

if (wanted('rocketmq')) {
  adapters.push(() => new RocketMqFaultAdapter({ log }));
  if (scenarios.some((s) => s.name === 'proxy-kill' || s.name === 'broker-scale-out')) adapters.push(() => new RocketMqFaultAdapter({ layout: 'two-brokers', log }));
  if (partitions.length > 0 && !networkUnavailableReason()) adapters.push(() => new RocketMqFaultAdapter({ network: true, log }));
}

const results: ScenarioResult[] = [];
/** Why the run fails: one entry per failing row, cluster or missing network. */
const failed: string[] = [];
const noNetwork = partitions.length > 0 ? networkUnavailableReason() : undefined;
if (noNetwork) {
  // Loud, and a failure in CI, where the partition scenarios must run.
  if (process.env['CI'] === 'true') failed.push(`no network of the suite's own: ${noNetwork}`);
  for (const scenario of partitions) {
    for (const transport of PARTITION_TRANSPORTS.filter(selects)) {
      results.push({ name: scenario.name, transport, messages: 0, lost: 0, duplicates: 0, recoverySeconds: null, skipped: `no network of the suite's own: ${noNetwork}` });
    }
  }
}
for (const make of adapters) {
  const adapter = make();
  const applicable = scenarios.filter((s) => !skipReasonOf(adapter, s));
  const skippedHere = scenarios.filter((s) => skipReasonOf(adapter, s) && !s.only);
  // A cluster or settings variant's row is only worth printing for the scenario it runs.
  const toReport = /-\d+-node$|-netns$|^nsq-|^redis-/.test(adapter.transport) ? [] : skippedHere;
  for (const scenario of toReport) results.push(await runScenario(adapter, scenario, { messages, dir, seed, log }));
  if (applicable.length === 0) continue;
  log(`starting ${adapter.transport}`);
  await adapter.start();
  try {
    for (const scenario of applicable) {
      let result: ScenarioResult;
      try {
        result = await runScenario(adapter, scenario, { messages, dir, seed, log });
      } catch (error) {
        failed.push(`${adapter.transport} ${scenario.name}: could not run: ${(error as Error).message}`);
        result = { name: scenario.name, transport: adapter.transport, messages: 0, lost: 0, duplicates: 0, recoverySeconds: null, notes: [`could not run: ${(error as Error).stack}`] };
      }
      const failure = rowFailure(result);
      if (failure !== undefined) {
        failed.push(`${adapter.transport} ${scenario.name}: ${failure}`);
        log(`  FAILED: ${failure}`);
      }
      const stall = rowStall(result);
      if (stall !== undefined) log(`  STALLED (reported, not a failure yet): ${stall}`);
      results.push(result);
      log(formatRow(result));
    }
    const together = holdsFailure(results.filter((r) => r.transport === adapter.transport));
    if (together !== undefined) {
      failed.push(`${adapter.transport}, its rows together: ${together}`);
      log(`FAILED (${adapter.transport}, its rows together): ${together}`);
    }
  } finally {
    await adapter.stop();
  }
}

const elapsed = Math.round((Date.now() - started) / 1000);
console.log('\nfault table');
const order = (r: ScenarioResult) => ALL.findIndex((s) => s.name === r.name);
results.sort((a, b) => a.transport.localeCompare(b.transport) || order(a) - order(b));
for (const result of results) console.log(formatRow(result));
for (const transport of new Set(results.map((r) => r.transport))) {
  const rows = results.filter((r) => r.transport === transport);
  const totals = pairedHolds(rows);
  if (totals) console.log(`${transport}: two holders over ${totals.rows} rows: redeliver ${totals.ours}, the bare client ${totals.bare}${holdsFailure(rows) === undefined ? '' : ' (FAILED)'}`);
}
console.log(`\n${results.filter((r) => !r.skipped).length} scenario runs in ${elapsed} s (${Math.floor(elapsed / 60)} min ${elapsed % 60} s), evidence in ${values.keep ? dir : '(removed; --keep keeps it)'}`);
if (!values.keep) rmSync(dir, { recursive: true, force: true });
console.log(jsonLine(results, elapsed, failed));
process.exit(failed.length > 0 ? 1 : 0);
