/**
 * The bare side of `npm run bench -- nsq`: an nsqjs Reader on the same
 * nsqd, the same topic layout and the same channel as redeliver's, that
 * `FIN`s each message (throughput) or `REQ`s it once with a delay
 * (lateness), nothing else.
 */
import nsq from 'nsqjs';
import { countdown, summariseLateness, within, type LatenessSummary } from '../redis/workload.js';
import type { NsqBenchSetup, Throughput } from './setup.js';

/** A Reader of `topic` through the setup's channel with max-in-flight `prefetch`; resolves once connected. */
async function reader(setup: NsqBenchSetup, topic: string, onMessage: (message: nsq.Message) => void): Promise<nsq.Reader> {
  const r = new nsq.Reader(topic, setup.channel, { nsqdTCPAddresses: [setup.nsqd], maxInFlight: setup.prefetch, maxAttempts: 0, clientId: 'bench-bare' });
  r.on('message', onMessage);
  r.on('error', () => undefined);
  const connected = new Promise<void>((resolve) => r.once('nsqd_connected', () => resolve()));
  r.connect();
  await within(connected, 10_000, 'bare reader connect');
  return r;
}

/** Consumes the `n` messages loaded on `topic`, `FIN` for each; timed from the Reader's start to the last `FIN` written. */
export async function bareThroughput(setup: NsqBenchSetup, topic: string, n: number): Promise<Throughput> {
  const finished = countdown(n);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const r = await reader(setup, topic, (message) => {
    message.finish();
    finished.tick();
  });
  try {
    await within(finished.done, setup.timeoutMs, 'bare throughput');
    const drainMs = performance.now() - t0;
    const cpuUsed = process.cpuUsage(cpu);
    return { side: 'bare nsqjs', messages: n, drainMs: Math.round(drainMs), perSec: Math.round((n * 1000) / drainMs), cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000) };
  } finally {
    r.close();
  }
}

/**
 * Each message of `topic` (body index `i`) is `REQ`d once with `delays[i]`
 * at its first delivery; lateness = the second delivery - (the `REQ` +
 * delay). `publish` sends the messages, once the Reader is connected.
 */
export async function bareReqLateness(setup: NsqBenchSetup, topic: string, delays: readonly number[], publish: () => Promise<void>): Promise<LatenessSummary> {
  const requeuedAt = new Array<number>(delays.length);
  const lateness: number[] = [];
  const handled = countdown(delays.length);
  const r = await reader(setup, topic, (message) => {
    const now = Date.now();
    const i = setup.indexOf(message.body);
    if (message.attempts === 1) {
      requeuedAt[i] = now;
      message.requeue(delays[i]!, false);
      return;
    }
    lateness.push(now - (requeuedAt[i]! + delays[i]!));
    message.finish();
    handled.tick();
  });
  try {
    await publish();
    await within(handled.done, setup.timeoutMs + Math.max(...delays), 'bare REQ delays');
    return summariseLateness(lateness);
  } finally {
    r.close();
  }
}
