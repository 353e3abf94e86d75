/**
 * `npm run bench -- latency [--transports a,b,c] [--seconds S] [--rounds R] [--rate N] [--prefetch P] [--max-seconds M] [--warmup-ms W] [--layers]`
 *
 * End-to-end latency, send to handled, of redeliver on every transport
 * beside the bare client of the same broker, at the same fixed rate, in the
 * same run. Every queue, topic, stream and key is named with a random token
 * of the run's own and deleted afterwards.
 *
 * For each transport (default all: sqlite, rabbitmq, redis, jetstream, nsq,
 * rocketmq), both sides are started, each with its own queue:
 * - redeliver: an Endpoint of concurrency P (default 100) with the default
 *   codec and recoverability, sending with `transport.send`;
 * - bare: the broker's own client, consuming with prefetch P and settling
 *   each message, nothing else: amqplib `consume` + `ack` (a confirm
 *   channel sends), ioredis `XREADGROUP` + `XACK` (`XADD` sends),
 *   JetStream `consume()` + `ack` (`publish` sends), an nsqjs `Reader` +
 *   `FIN` (a `Writer` sends), `SimpleConsumer` `receive` + `ack` (a
 *   `Producer` sends). SQLite has none.
 * - with `--layers`, a third side: redeliver's transport alone,
 *   `transport.consume` with prefetch P and a listener that parses the
 *   body and acks, no Endpoint: it tells the transport's share of a gap
 *   from the Endpoint's. It runs at the same rate, in the same rounds.
 * 1. maximum: each side runs a closed loop with 2P messages sent and not
 *    yet handled for M seconds (default 4; the first second not counted).
 *    The rate is half the lower of the two maxima, or N with `--rate`.
 * 2. latency: each side sends at that rate for S seconds in all (default
 *    30), in R rounds (default 6) of S / R seconds, the sides taking turns
 *    and the order reversed every other round; each round starts with W ms
 *    (default 1,000) of sends not counted. Sends follow a timeline fixed up
 *    front and never wait for earlier sends to settle; the sender writes
 *    the message's intended send time and the time of the send call into
 *    the body (JSON, with a 256-character payload), and the handler notes
 *    the time it starts. Latency = handler start - intended send time (a
 *    stalled sender or broker therefore counts in full: no coordinated
 *    omission); the time from the send call is shown beside it. Every
 *    message must be handled; duplicates are counted.
 *
 * p50, p99 and p99.9 are over all of a side's rounds. The goal: redeliver's
 * p99 within 1.2x of the bare client's, judged on `p99Ratio`, the median
 * over rounds of the ratio within a round (on a shared machine one round
 * that meets a burst of other work can set a pooled p99 alone; the pooled
 * ratio is shown beside it).
 * The last line is one JSON object with a row per transport.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { payloadString } from '../redis/workload.js';
import { medianOf, positiveArg, printJson, printTable, roundTo } from '../report.js';
import { jetstreamCase } from '../latency/jetstream.js';
import { nsqCase } from '../latency/nsq.js';
import { rabbitmqCase } from '../latency/rabbitmq.js';
import { redisCase } from '../latency/redis.js';
import { redeliverRig, transportRig, type BrokerCase, type CaseSettings, type Rig } from '../latency/rig.js';
import { rocketmqCase } from '../latency/rocketmq.js';
import { sqliteCase } from '../latency/sqlite.js';
import { closedLoopMax, fixedRateRound, Rounds, summarise, type LatencySummary, type RoundResult } from '../latency/timeline.js';

/** redeliver's Endpoint, redeliver's transport alone (with `--layers`), the broker's own client. */
type SideName = 'redeliver' | 'transport' | 'bare';
const TRANSPORTS = ['sqlite', 'rabbitmq', 'redis', 'jetstream', 'nsq', 'rocketmq'] as const;
type TransportName = (typeof TRANSPORTS)[number];
/** The goal: redeliver's p99 at most this many times the bare client's. */
const GOAL_RATIO = 1.2;
const DRAIN_TIMEOUT_MS = 60_000;

interface Row {
  readonly transport: string;
  readonly bare: string;
  readonly ratePerSec: number;
  readonly maxPerSec: number | undefined;
  readonly bareMaxPerSec: number | undefined;
  readonly redeliver: LatencySummary;
  readonly redeliverFromSendCall: LatencySummary;
  readonly bareSide: LatencySummary | undefined;
  readonly bareFromSendCall: LatencySummary | undefined;
  /** The transport without the Endpoint (with `--layers`). */
  readonly transportAlone: LatencySummary | undefined;
  readonly transportAloneCpuUsPerMessage: number | undefined;
  readonly roundP99Ratios: number[];
  readonly duplicates: number;
  readonly bareDuplicates: number;
  readonly maxSenderLagMs: number;
  /** The median over rounds of each side's CPU time per message, microseconds. */
  readonly cpuUsPerMessage: number;
  readonly bareCpuUsPerMessage: number | undefined;
  /** The median over rounds of each side's event-loop delay p99, ms. */
  readonly loopDelayP99Ms: number;
  readonly bareLoopDelayP99Ms: number | undefined;
  /** Stamps handled while no round of theirs was under way (a redelivery after its round ended). */
  readonly stray: number;
  readonly load: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      transports: { type: 'string', default: TRANSPORTS.join(',') },
      seconds: { type: 'string', default: '30' },
      rounds: { type: 'string', default: '6' },
      rate: { type: 'string' },
      prefetch: { type: 'string', default: '100' },
      'max-seconds': { type: 'string', default: '4' },
      'warmup-ms': { type: 'string', default: '1000' },
      layers: { type: 'boolean', default: false },
      'rabbitmq-url': { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
      'redis-url': { type: 'string', default: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379' },
      'nats-servers': { type: 'string', default: process.env['NATS_URL'] ?? '127.0.0.1:4222' },
      nsqd: { type: 'string', default: '127.0.0.1:4150' },
      'nsqd-http': { type: 'string', default: '127.0.0.1:4151' },
      'rocketmq-endpoints': { type: 'string', default: '127.0.0.1:8081' },
      'rocketmq-name-server': { type: 'string', default: '127.0.0.1:9876' },
    },
  });
  const transports = values.transports.split(',').map((t) => t.trim());
  for (const t of transports) if (!(TRANSPORTS as readonly string[]).includes(t)) throw new RangeError(`--transports: unknown transport '${t}' (known: ${TRANSPORTS.join(', ')})`);
  const seconds = Number(values.seconds);
  if (!(seconds > 0)) throw new RangeError(`--seconds must be a number > 0, got ${values.seconds}`);
  const rounds = positiveArg('rounds', values.rounds);
  const fixedRate = values.rate === undefined ? undefined : positiveArg('rate', values.rate);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const maxSeconds = positiveArg('max-seconds', values['max-seconds']);
  const warmupMs = positiveArg('warmup-ms', values['warmup-ms']);
  const payload = payloadString(42);
  const settings: CaseSettings = { token: randomUUID().slice(0, 8), prefetch };
  const cases: Record<TransportName, () => BrokerCase> = {
    sqlite: () => sqliteCase(settings),
    rabbitmq: () => rabbitmqCase(settings, values['rabbitmq-url']),
    redis: () => redisCase(settings, values['redis-url']),
    jetstream: () => jetstreamCase(settings, values['nats-servers']),
    nsq: () => nsqCase(settings, values.nsqd, values['nsqd-http']),
    rocketmq: () => rocketmqCase(settings, values['rocketmq-endpoints'], values['rocketmq-name-server']),
  };
  const loads = [loadavg()[0]!];
  const rows: Row[] = [];
  const failures: { transport: string; error: string }[] = [];
  let nextRound = 0;

  for (const name of transports as TransportName[]) {
    const brokerCase = cases[name]();
    const rigs: Rig[] = [];
    try {
      const recorder = new Rounds();
      const redeliver = await redeliverRig(brokerCase.transport('endpoint'), prefetch, recorder.onHandled);
      rigs.push(redeliver);
      const alone = values.layers ? await transportRig(brokerCase.transport('transport'), prefetch, recorder.onHandled) : undefined;
      if (alone !== undefined) rigs.push(alone);
      const bare = brokerCase.bare === undefined ? undefined : await brokerCase.bare(recorder.onHandled);
      if (bare !== undefined) rigs.push(bare);

      const maximum = (rig: Rig) => closedLoopMax(rig, recorder, nextRound++, 2 * prefetch, 1_000, (maxSeconds - 1) * 1_000 || 1_000, payload, DRAIN_TIMEOUT_MS);
      const maxPerSec = fixedRate === undefined ? await maximum(redeliver) : undefined;
      const bareMaxPerSec = fixedRate === undefined && bare !== undefined ? await maximum(bare) : undefined;
      const rate = fixedRate ?? Math.max(1, Math.floor(Math.min(maxPerSec!, bareMaxPerSec ?? Infinity) / 2));
      console.error(`${name}: max ${maxPerSec ?? '-'}/s redeliver, ${bareMaxPerSec ?? '-'}/s bare; sending at ${rate}/s`);

      const results: { side: SideName; result: RoundResult }[] = [];
      const sides = [
        { side: 'redeliver' as const, rig: redeliver },
        ...(alone === undefined ? [] : [{ side: 'transport' as const, rig: alone }]),
        ...(bare === undefined ? [] : [{ side: 'bare' as const, rig: bare }]),
      ];
      for (let round = 0; round < rounds; round++) {
        for (const { side, rig } of round % 2 === 0 ? [...sides].reverse() : sides) {
          const result = await fixedRateRound(rig, recorder, nextRound++, rate, warmupMs, (seconds * 1000) / rounds, payload, DRAIN_TIMEOUT_MS);
          results.push({ side, result });
          console.error(`${name} round ${round + 1} ${side}: p50 ${summarise(result.fromIntended).p50} ms, p99 ${summarise(result.fromIntended).p99} ms, max sends in flight ${result.maxSendsInFlight}, sender lag ${result.maxSenderLagMs} ms, cpu ${result.cpuUsPerMessage} us/msg, loop delay p99 ${result.loopDelayP99Ms} ms`);
        }
      }
      loads.push(loadavg()[0]!);
      const of = (side: SideName) => results.filter((r) => r.side === side).map((r) => r.result);
      const pooled = (side: SideName, field: 'fromIntended' | 'fromSent') => summarise(of(side).flatMap((r) => r[field]));
      const roundP99Ratios = bare === undefined ? [] : of('redeliver').map((r, i) => roundTo(summarise(r.fromIntended).p99 / summarise(of('bare')[i]!.fromIntended).p99, 2));
      rows.push({
        transport: name,
        bare: brokerCase.bareName ?? '-',
        ratePerSec: rate,
        maxPerSec,
        bareMaxPerSec,
        redeliver: pooled('redeliver', 'fromIntended'),
        redeliverFromSendCall: pooled('redeliver', 'fromSent'),
        bareSide: bare === undefined ? undefined : pooled('bare', 'fromIntended'),
        bareFromSendCall: bare === undefined ? undefined : pooled('bare', 'fromSent'),
        transportAlone: alone === undefined ? undefined : pooled('transport', 'fromIntended'),
        transportAloneCpuUsPerMessage: alone === undefined ? undefined : medianOf(of('transport').map((r) => r.cpuUsPerMessage)),
        roundP99Ratios,
        duplicates: of('redeliver').reduce((n, r) => n + r.duplicates, 0),
        bareDuplicates: of('bare').reduce((n, r) => n + r.duplicates, 0),
        maxSenderLagMs: Math.max(...results.map((r) => r.result.maxSenderLagMs)),
        cpuUsPerMessage: medianOf(of('redeliver').map((r) => r.cpuUsPerMessage)),
        bareCpuUsPerMessage: bare === undefined ? undefined : medianOf(of('bare').map((r) => r.cpuUsPerMessage)),
        loopDelayP99Ms: roundTo(medianOf(of('redeliver').map((r) => r.loopDelayP99Ms)), 2),
        bareLoopDelayP99Ms: bare === undefined ? undefined : roundTo(medianOf(of('bare').map((r) => r.loopDelayP99Ms)), 2),
        stray: recorder.stray,
        load: roundTo(loadavg()[0]!, 2),
      });
    } catch (error) {
      failures.push({ transport: name, error: String((error as Error)?.stack ?? error) });
      console.error(`${name}: ${String((error as Error)?.stack ?? error)}`);
    } finally {
      for (const rig of rigs.reverse()) await rig.close().catch((error: unknown) => console.error(`${name}: close: ${String(error)}`));
      await brokerCase.cleanup().catch((error: unknown) => console.error(`${name}: cleanup: ${String(error)}`));
    }
  }

  /** The median over rounds of redeliver's p99 / the bare client's in the same round: the goal's measure. */
  const ratio = (row: Row) => (row.roundP99Ratios.length === 0 ? undefined : roundTo(medianOf(row.roundP99Ratios), 2));
  /** redeliver's p99 over all its rounds / the bare client's over all of its. */
  const pooledRatio = (row: Row) => (row.bareSide === undefined ? undefined : roundTo(row.redeliver.p99 / row.bareSide.p99, 2));
  printTable(
    `end-to-end latency, send to handler start, ms: ${seconds} s per side at a fixed rate (half the lower measured maximum${fixedRate === undefined ? '' : `; here --rate ${fixedRate}`}), ${rounds} rounds with sides in turns, prefetch ${prefetch}; measured from each message's intended send time`,
    rows.map((row) => ({
      transport: row.transport,
      'rate/s': row.ratePerSec,
      'max/s rdl|bare': `${row.maxPerSec ?? '-'} | ${row.bareMaxPerSec ?? '-'}`,
      'rdl p50': row.redeliver.p50,
      'rdl p99': row.redeliver.p99,
      'rdl p99.9': row.redeliver.p999,
      'bare p50': row.bareSide?.p50 ?? '-',
      'bare p99': row.bareSide?.p99 ?? '-',
      'bare p99.9': row.bareSide?.p999 ?? '-',
      'p99 ratio (median of rounds)': ratio(row) ?? '-',
      'pooled p99 ratio': pooledRatio(row) ?? '-',
      goal: ratio(row) === undefined ? 'no bare peer' : ratio(row)! <= GOAL_RATIO ? 'met' : 'missed',
      'p99 ratio by round': row.roundP99Ratios.join(' / ') || '-',
      ...(values.layers ? { 'transport alone p50 | p99 | cpu us/msg': row.transportAlone === undefined ? '-' : `${row.transportAlone.p50} | ${row.transportAlone.p99} | ${row.transportAloneCpuUsPerMessage}` } : {}),
    })),
  );
  printTable(
    "the same, measured from the send call (what a sender that waits would see), and the run itself: the bench process's CPU time per message and event-loop delay p99 (median of rounds)",
    rows.map((row) => ({
      transport: row.transport,
      'rdl p50': row.redeliverFromSendCall.p50,
      'rdl p99': row.redeliverFromSendCall.p99,
      'bare p50': row.bareFromSendCall?.p50 ?? '-',
      'bare p99': row.bareFromSendCall?.p99 ?? '-',
      'rdl max': row.redeliver.max,
      'bare max': row.bareSide?.max ?? '-',
      'messages per side': row.redeliver.count,
      'duplicates rdl|bare': `${row.duplicates} | ${row.bareDuplicates}`,
      'late strays': row.stray,
      'sender lag max ms': row.maxSenderLagMs,
      'cpu us/msg rdl|bare': `${row.cpuUsPerMessage} | ${row.bareCpuUsPerMessage ?? '-'}`,
      'loop delay p99 ms rdl|bare': `${row.loopDelayP99Ms} | ${row.bareLoopDelayP99Ms ?? '-'}`,
    })),
  );
  for (const f of failures) console.log(`\n${f.transport} failed: ${f.error.split('\n')[0]}`);
  console.log(`\nload average (1 min) during the run: ${loads.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

  printJson({
    scenario: 'latency',
    rows: rows.map((row) => ({
      transport: row.transport,
      ratePerSec: row.ratePerSec,
      p50Ms: row.redeliver.p50,
      p99Ms: row.redeliver.p99,
      p999Ms: row.redeliver.p999,
      bareP99Ms: row.bareSide?.p99 ?? null,
      bareP50Ms: row.bareSide?.p50 ?? null,
      bareP999Ms: row.bareSide?.p999 ?? null,
      p99Ratio: ratio(row) ?? null,
      pooledP99Ratio: pooledRatio(row) ?? null,
      p99RatioByRound: row.roundP99Ratios,
      goalMet: ratio(row) === undefined ? null : ratio(row)! <= GOAL_RATIO,
      p99FromSendCallMs: row.redeliverFromSendCall.p99,
      bareP99FromSendCallMs: row.bareFromSendCall?.p99 ?? null,
      ...(row.transportAlone === undefined ? {} : { transportAloneP50Ms: row.transportAlone.p50, transportAloneP99Ms: row.transportAlone.p99, transportAloneCpuUsPerMessage: row.transportAloneCpuUsPerMessage }),
      maxPerSec: row.maxPerSec ?? null,
      bareMaxPerSec: row.bareMaxPerSec ?? null,
      messages: row.redeliver.count,
      duplicates: row.duplicates,
      bareDuplicates: row.bareDuplicates,
      strays: row.stray,
      cpuUsPerMessage: row.cpuUsPerMessage,
      bareCpuUsPerMessage: row.bareCpuUsPerMessage ?? null,
      loopDelayP99Ms: row.loopDelayP99Ms,
      bareLoopDelayP99Ms: row.bareLoopDelayP99Ms ?? null,
      loadAverage: row.load,
    })),
    failed: failures.map((f) => f.transport),
    seconds,
    rounds,
    prefetch,
    loadAverage: loads.map((l) => roundTo(l, 2)),
  });
}
