/**
 * `npm run bench -- jetstream-designs [--messages N] [--rate P] [--fresh F] [--stall-delay MS] [--servers URL]`
 *
 * The two ways to hold a delayed retry on JetStream 2.9, measured with the
 * NATS client directly (not the transport), each case on streams of its
 * own under a random prefix, all deleted afterwards:
 *
 * (a) `nak(delay)` on the work consumer, the retry state in a key-value
 *     bucket keyed by message id (bench/jetstream/designs/nak-kv.ts);
 * (b) a copy in a delay stream, moved back to the work stream by a mover
 *     that `nak`s it until due (bench/jetstream/designs/delay-stream.ts);
 * (b, held) the same, but the mover keeps a copy due within 2 s on a
 *     timer of its own instead of `nak`ing it, and `nak`s a later one to
 *     come back 1 s before it is due (lateness case only).
 *
 * 1. lateness: N messages (default 1,000) for each delay, 500 ms and 5 s,
 *    published at P per second (default 500), each failing once and
 *    retried with its delay; lateness = the retry's handler start - (the
 *    failure + delay), p50 / p99 / max, early = negative. With it, what
 *    each design spends per retry (a: bucket put + get; b: copy publish +
 *    confirmed ack, then the move's publish + confirmed ack).
 * 2. stall: a consumer with `max_ack_pending` 10 and pulls of 10; the
 *    stream holds 10 messages that fail and wait out a 10 s delay, then F
 *    fresh ones (default 100,000). Counted: fresh messages handled in the
 *    10 s after the tenth was settled.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { printJson, printTable, positiveArg, roundTo } from '../report.js';
import { assertNoStreams, deleteStreams, withClients, type NatsClients } from '../jetstream/server.js';
import { caseNames, type CaseNames, type DelayDesign } from '../jetstream/designs/design.js';
import { NakKvDesign } from '../jetstream/designs/nak-kv.js';
import { DelayStreamDesign } from '../jetstream/designs/delay-stream.js';
import { measureLateness, type LatenessByDelay } from '../jetstream/designs/lateness.js';
import { measureStall, type StallResult } from '../jetstream/designs/stall.js';

const BODY_BYTES = 256;
const DELAYS_MS = [500, 5_000] as const;
const STALLED = 10;
const STALL_PREFETCH = 10;

/** How far ahead the mover of (b, held) keeps copies itself instead of `nak`ing them. */
const HOLD_WITHIN_MS = 2_000;

interface DesignEntry {
  readonly key: 'nakKv' | 'delayStream' | 'delayStreamHeld';
  readonly label: string;
  /** Whether the stall case runs on it (the held variant stalls exactly as (b) does). */
  readonly stall: boolean;
  make(clients: NatsClients, names: CaseNames): DelayDesign;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '500' },
      fresh: { type: 'string', default: '100000' },
      'stall-delay': { type: 'string', default: '10000' },
      servers: { type: 'string', default: process.env['NATS_URL'] ?? '127.0.0.1:4222' },
    },
  });
  const perDelay = positiveArg('messages', values.messages);
  const rate = positiveArg('rate', values.rate);
  const freshCount = positiveArg('fresh', values.fresh);
  const stallDelayMs = positiveArg('stall-delay', values['stall-delay']);
  const servers = values.servers;
  const prefix = `bench-jsd-${randomUUID().slice(0, 8)}`;
  const body = randomBytes(BODY_BYTES);
  const load = [loadavg()[0]!];

  const designs: DesignEntry[] = [
    { key: 'nakKv', label: '(a) nak(delay) + KV', stall: true, make: ({ js, jsm }, names) => new NakKvDesign(js, jsm, names) },
    { key: 'delayStream', label: '(b) delay stream + mover', stall: true, make: ({ js, jsm }, names) => new DelayStreamDesign(js, jsm, names) },
    {
      key: 'delayStreamHeld',
      label: `(b, held) mover holds copies due within ${HOLD_WITHIN_MS} ms`,
      stall: false,
      make: ({ js, jsm }, names) => new DelayStreamDesign(js, jsm, names, { holdWithinMs: HOLD_WITHIN_MS }),
    },
  ];

  try {
    const lateness = new Map<DesignEntry['key'], { byDelay: LatenessByDelay; design: DelayDesign }>();
    const stalls = new Map<DesignEntry['key'], StallResult>();
    await withClients(servers, 'redeliver-bench-designs', async (clients) => {
      /** Runs one case on streams of its own, deleted when it is done. */
      const inCase = async <T>(tag: string, fn: (names: CaseNames) => Promise<T>): Promise<T> => {
        const names = caseNames(prefix, tag);
        try {
          return await fn(names);
        } finally {
          await deleteStreams(clients.jsm, names.streamPrefix);
          load.push(loadavg()[0]!);
        }
      };
      for (const entry of designs) {
        await inCase(`${entry.key}-lat`, async (names) => {
          const design = entry.make(clients, names);
          const byDelay = await measureLateness(clients, names, design, { delaysMs: DELAYS_MS, perDelay, rate, body, timeoutMs: 120_000 });
          lateness.set(entry.key, { byDelay, design });
        });
      }
      for (const entry of designs.filter((d) => d.stall)) {
        await inCase(`${entry.key}-stall`, async (names) => {
          const design = entry.make(clients, names);
          stalls.set(entry.key, await measureStall(clients, names, design, { stalled: STALLED, delayMs: stallDelayMs, fresh: freshCount, prefetch: STALL_PREFETCH, body }));
        });
      }
    });

    printTable(
      `lateness: ${perDelay} messages per delay published at ${rate}/s, each failing once; lateness = retry's handler start - (failure + delay), ms`,
      designs.flatMap((entry) =>
        lateness.get(entry.key)!.byDelay.map(({ delayMs, lateness: l }) => ({ design: entry.label, delay: `${delayMs} ms`, p50: l.p50, p99: l.p99, max: l.max, early: l.early, retries: l.count })),
      ),
    );
    printTable(
      'cost per retry: the design\'s own round trips, ms',
      designs.flatMap((entry) => lateness.get(entry.key)!.design.costs.summary().map((c) => ({ design: entry.label, operation: c.operation, count: c.count, p50: roundTo(c.p50, 2), p99: roundTo(c.p99, 2) }))),
    );
    printTable(
      `stall: max_ack_pending ${STALL_PREFETCH}, ${STALLED} messages waiting out ${stallDelayMs} ms, ${freshCount} fresh behind them; fresh handled in those ${stallDelayMs} ms`,
      designs.filter((d) => d.stall).map((entry) => {
        const s = stalls.get(entry.key)!;
        return { design: entry.label, 'fresh/s': s.freshPerSec, handled: s.freshInWindow, 'first after ms': s.firstFreshMs ?? '-', 'backlog ran out': s.exhausted ? 'yes' : 'no' };
      }),
    );
    const retries = perDelay * DELAYS_MS.length;
    const movers = (['delayStream', 'delayStreamHeld'] as const).map((key) => lateness.get(key)!.design as DelayStreamDesign);
    for (const [k, mover] of movers.entries()) {
      console.log(`${k === 0 ? '\n' : ''}${designs[k + 1]!.label}: ${mover.holds} nak holds and ${mover.timed} copies timed by the mover for ${retries} retries`);
    }
    console.log(`load average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

    const figures = (key: DesignEntry['key']) => {
      const { byDelay, design } = lateness.get(key)!;
      const costs = design.costs.summary();
      const stall = stalls.get(key);
      return {
        lateness: Object.fromEntries(byDelay.map(({ delayMs, lateness: l }) => [String(delayMs), { p50: l.p50, p99: l.p99, max: l.max, early: l.early }])),
        retryCostP50Ms: roundTo(costs.reduce((sum, c) => sum + c.p50, 0), 2),
        retryCostsP50Ms: Object.fromEntries(costs.map((c) => [c.operation, roundTo(c.p50, 2)])),
        ...(stall && { stallFreshPerSec: stall.freshPerSec, stallFreshHandled: stall.freshInWindow, stallBacklogRanOut: stall.exhausted }),
      };
    };
    const [delayStream, delayStreamHeld] = movers as [DelayStreamDesign, DelayStreamDesign];
    printJson({
      scenario: 'jetstream-designs',
      perDelay,
      delaysMs: DELAYS_MS,
      ratePerSec: rate,
      stallDelayMs,
      stallMaxAckPending: STALL_PREFETCH,
      nakKv: figures('nakKv'),
      delayStream: { ...figures('delayStream'), naksPerRetry: roundTo(delayStream.holds / retries, 2) },
      delayStreamHeld: { ...figures('delayStreamHeld'), holdWithinMs: HOLD_WITHIN_MS, naksPerRetry: roundTo(delayStreamHeld.holds / retries, 2), timedPerRetry: roundTo(delayStreamHeld.timed / retries, 2) },
      loadAverage: load.map((l) => roundTo(l, 2)),
    });
  } finally {
    await assertNoStreams(servers, prefix);
  }
}
