/**
 * `npm run bench -- nsq [--messages N] [--prefetch P] [--rounds R] [--delayed M] [--rate S] [--seed X] [--cost-messages C] [--base-port B]`
 *
 * redeliver on NSQ against a bare nsqjs Reader on the same nsqd, in the
 * same run. The nsqd (and the nsqlookupd it registers with) are the
 * bench's own, on ports B to B+3 (default 4290), with a data directory
 * removed after the run.
 *
 * 1. throughput: N messages (default 20,000), each `{ i, payload }` as
 *    JSON with a 256-character payload in redeliver's envelope, are loaded
 *    first into a topic of the round's own, then consumed with prefetch P
 *    (default 100): the Endpoint's concurrency, the Reader's max-in-flight;
 *    one connection each.
 *    - bare nsqjs: a Reader that `FIN`s each message, nothing else.
 *    - redeliver: an Endpoint over an NsqTransport, a handler that does
 *      nothing.
 *    Throughput = (N - P) / (consumer start to message N - P finished): the
 *    last P messages are left out, since nsqd flushes the last partial
 *    output buffer of a drain on its 250 ms tick, whichever side reads it
 *    (see `drainClock`). One warm-up round of each side first, not
 *    counted; then R rounds (default 5), bare then redeliver, the order
 *    reversed every other round. `ratio` = the median of the rounds'
 *    redeliver / bare.
 * 2. delays: M messages (default 1,000) per side, each retried once after
 *    a delay uniform in [100 ms, 20 s) (seeded), both sides at once on
 *    topics of their own: redeliver's handler throws a `RetryLaterError`
 *    of that delay (a copy held by nsqd); the bare Reader `REQ`s with it.
 *    Both consumers subscribe, then wait out nsqd's
 *    `--queue-scan-refresh-interval` (5 s: a channel younger than its last
 *    refresh is not scanned for due messages yet), then message i goes to
 *    both topics at S per second (default 200). Lateness = the second
 *    delivery - (the throw or `REQ` + delay); negative is early.
 * 3. cost of nsqd's durability settings: C messages (default 10,000) sent
 *    by redeliver and consumed, on nsqd restarted with its defaults, with
 *    `--mem-queue-size=0`, and with `--mem-queue-size=0 --sync-every=1`.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { decodeEnvelope } from '../../src/transports/nsq/index.js';
import { NsqNodes, type NsqdSettings } from '../../test/support/nsq-node.js';
import { bareReqConsumer, bareThroughput } from '../nsq/bare.js';
import { load, redeliverDelayConsumer, redeliverThroughput, withTransport } from '../nsq/redeliver.js';
import { messageBody, type NsqBenchSetup, type Throughput } from '../nsq/setup.js';
import { paced, payloadString, uniformDelays, within } from '../redis/workload.js';
import { medianOf, positiveArg, printJson, printTable, roundTo } from '../report.js';

const MIN_DELAY_MS = 100;
const MAX_DELAY_MS = 20_000;
/** nsqd's `--queue-scan-refresh-interval` (default 5 s) and a margin. */
const SCAN_REFRESH_WAIT_MS = 5_500;

const COST_SETTINGS: readonly { readonly name: string; readonly settings: NsqdSettings }[] = [
  { name: 'defaults (mem-queue-size 10000, sync-every 2500)', settings: {} },
  { name: '--mem-queue-size=0', settings: { memQueueSize: 0 } },
  { name: '--mem-queue-size=0 --sync-every=1', settings: { memQueueSize: 0, syncEvery: 1 } },
];

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '20000' },
      prefetch: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '5' },
      delayed: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '200' },
      seed: { type: 'string', default: '42' },
      'cost-messages': { type: 'string', default: '10000' },
      'base-port': { type: 'string', default: '4290' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rounds = positiveArg('rounds', values.rounds);
  const m = positiveArg('delayed', values.delayed);
  const rate = positiveArg('rate', values.rate);
  const seed = positiveArg('seed', values.seed);
  const costMessages = positiveArg('cost-messages', values['cost-messages']);
  const basePort = positiveArg('base-port', values['base-port']);
  const loads = [loadavg()[0]!];

  const nodes = await NsqNodes.start({ basePort, nodes: 1 });
  const run = randomUUID().slice(0, 8);
  const setup: NsqBenchSetup = {
    nsqd: nodes.tcpAddress(1),
    http: nodes.httpAddress(1),
    channel: 'redeliver',
    prefetch,
    payload: payloadString(seed),
    timeoutMs: 180_000,
    indexOf: (body) => (JSON.parse(Buffer.from(decodeEnvelope(body)?.body ?? body).toString()) as { i: number }).i,
  };
  const topics: string[] = [];
  const topic = (name: string) => {
    topics.push(`bench-${run}-${name}`);
    return topics[topics.length - 1]!;
  };
  const deleteTopics = async () => {
    for (const t of topics.splice(0)) await nodes.post(1, `/topic/delete?topic=${t}`).catch(() => undefined);
  };

  try {
    // 1. throughput: a warm-up round of each side, then interleaved rounds.
    const runs: (Throughput & { round: number })[] = [];
    const sides = [
      { name: 'bare nsqjs', consume: (t: string) => bareThroughput(setup, t, n) },
      { name: 'redeliver', consume: (t: string) => withTransport(setup, (transport) => redeliverThroughput(transport, setup, t, n)) },
    ] as const;
    for (let round = -1; round < rounds; round++) {
      for (const side of round % 2 === 1 ? [...sides].reverse() : sides) {
        const t = topic(`${side.name === 'redeliver' ? 'rdl' : 'bare'}-${round + 1}`);
        await withTransport(setup, (transport) => load(transport, t, n, setup, `${round}-m`));
        const result = await side.consume(t);
        if (round >= 0) runs.push({ ...result, round });
        await deleteTopics();
      }
      loads.push(loadavg()[0]!);
    }

    // 2. delays: redeliver's delayed retries and bare REQs of the same delays, side by side.
    const delays = uniformDelays(m, seed, MIN_DELAY_MS, MAX_DELAY_MS);
    const [lateness, bareReq] = await withTransport(setup, (sender) =>
      withTransport(setup, async (transport) => {
        const rdlTopic = topic('delays');
        const reqTopic = topic('req');
        const consumers = [await redeliverDelayConsumer(transport, setup, rdlTopic, delays), await bareReqConsumer(setup, reqTopic, delays)] as const;
        try {
          await new Promise((resolve) => setTimeout(resolve, SCAN_REFRESH_WAIT_MS));
          await paced(m, rate, (i) => {
            const send = (t: string) => sender.send(t, { id: `d-${i}`, body: messageBody(i, setup.payload), headers: {} });
            return Promise.all([send(rdlTopic), send(reqTopic)]).then(() => undefined);
          });
          return await within(Promise.all([consumers[0].done, consumers[1].done]), setup.timeoutMs + Math.max(...delays), 'delays');
        } finally {
          for (const c of consumers) await c.stop();
        }
      }),
    );
    loads.push(loadavg()[0]!);
    await deleteTopics();

    // 3. what nsqd's durability settings cost: sends and consumption through redeliver.
    const costs: { name: string; sendsPerSec: number; consumedPerSec: number }[] = [];
    for (const { name, settings } of COST_SETTINGS) {
      nodes.configure(settings);
      await nodes.restart(1);
      const t = topic(`cost-${costs.length}`);
      const sendsPerSec = await withTransport(setup, (transport) => load(transport, t, costMessages, setup, 'c'));
      const consumed = await withTransport(setup, (transport) => redeliverThroughput(transport, setup, t, costMessages));
      costs.push({ name, sendsPerSec, consumedPerSec: consumed.perSec });
      await deleteTopics();
      loads.push(loadavg()[0]!);
    }

    const of = (side: Throughput['side']) => runs.filter((r) => r.side === side);
    const median = (side: Throughput['side']) => Math.round(medianOf(of(side).map((r) => r.perSec)));
    const roundRatios = Array.from({ length: rounds }, (_, round) => {
      const perSec = (side: Throughput['side']) => runs.find((r) => r.round === round && r.side === side)!.perSec;
      return roundTo(perSec('redeliver') / perSec('bare nsqjs'), 3);
    });
    const ratio = roundTo(medianOf(roundRatios), 3);
    printTable(
      `nsq: ${n} messages loaded first, then consumed with prefetch ${prefetch}; per second from consumer start to message ${n - prefetch} finished (a warm-up round, then ${rounds} rounds, order reversed every other round)`,
      sides.map((side) => ({
        side: side.name,
        'per sec (median)': median(side.name),
        'vs bare (median of rounds)': side.name === 'redeliver' ? ratio : 1,
        rounds: of(side.name).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
        'cpu ms': of(side.name).map((r) => r.cpuMs.toLocaleString('en-US')).join(' / '),
      })),
    );
    console.log(`redeliver / bare by round: ${roundRatios.join(' / ')}`);
    printTable(`delayed: ${m} messages per side, both sides at once, sent at ${rate}/s, each retried once after a delay uniform in [${MIN_DELAY_MS} ms, ${MAX_DELAY_MS} ms); lateness = handled - (thrown or REQ + delay), ms`, [
      { side: 'redeliver (copy held by nsqd)', p50: lateness.p50, p99: lateness.p99, max: lateness.max, early: lateness.early, handled: lateness.count },
      { side: 'bare REQ', p50: bareReq.p50, p99: bareReq.p99, max: bareReq.max, early: bareReq.early, handled: bareReq.count },
    ]);
    printTable(`nsqd settings: ${costMessages} messages sent through redeliver (${SEND_CHUNK_NOTE}), then consumed with prefetch ${prefetch}`, costs.map((c) => ({ nsqd: c.name, 'sends per sec': c.sendsPerSec, 'consumed per sec': c.consumedPerSec })));
    console.log(`\nload average (1 min) during the run: ${loads.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs; nsqd of the bench's own on ${setup.nsqd}`);

    const barePerSec = median('bare nsqjs');
    const redeliverPerSec = median('redeliver');
    printJson({
      ratio,
      delayP99LatenessMs: lateness.p99,
      bareReqP99LatenessMs: bareReq.p99,
      delayEarlyCount: lateness.early,
      scenario: 'nsq',
      barePerSec,
      redeliverPerSec,
      bareRounds: of('bare nsqjs').map((r) => r.perSec),
      redeliverRounds: of('redeliver').map((r) => r.perSec),
      roundRatios,
      bareCpuMs: of('bare nsqjs').map((r) => r.cpuMs),
      redeliverCpuMs: of('redeliver').map((r) => r.cpuMs),
      bareDrainMs: of('bare nsqjs').map((r) => r.drainMs),
      redeliverDrainMs: of('redeliver').map((r) => r.drainMs),
      messages: n,
      prefetch,
      rounds,
      delayed: m,
      delayRatePerSec: rate,
      delayP50LatenessMs: lateness.p50,
      delayMaxLatenessMs: lateness.max,
      bareReqP50LatenessMs: bareReq.p50,
      bareReqMaxLatenessMs: bareReq.max,
      bareReqEarlyCount: bareReq.early,
      settingsCost: costs,
      loadAverage: loads.map((l) => roundTo(l, 2)),
    });
  } finally {
    await deleteTopics();
    await nodes.stop();
  }
}

const SEND_CHUNK_NOTE = '500 sends in flight at once';
