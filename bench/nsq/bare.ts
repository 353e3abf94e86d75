/**
 * The bare side of `npm run bench -- nsq`: an nsqjs Reader on the same
 * nsqd, the same topic layout and the same channel as redeliver's, that
 * `FIN`s each message (throughput) or `REQ`s it once with a delay
 * (lateness), nothing else.
 */
import nsq from 'nsqjs';
import { countdown, summariseLateness, within, type LatenessSummary } from '../redis/workload.js';
import { drainClock, type NsqBenchSetup, type Throughput } from './setup.js';

/** A Reader of `topic` through the setup's channel with max-in-flight `prefetch`, one connection; resolves once connected. */
async function reader(setup: NsqBenchSetup, topic: string, onMessage: (message: nsq.Message) => void): Promise<nsq.Reader> {
  const r = new nsq.Reader(topic, setup.channel, { nsqdTCPAddresses: [setup.nsqd], maxInFlight: setup.prefetch, maxAttempts: 0, clientId: 'bench-bare' });
  r.on('message', onMessage);
  r.on('error', () => undefined);
  const connected = new Promise<void>((resolve) => r.once('nsqd_connected', () => resolve()));
  r.connect();
  await within(connected, 10_000, 'bare reader connect');
  return r;
}

/** Consumes the `n` messages loaded on `topic`, `FIN` for each; timed from the Reader's start (see `drainClock`). */
export async function bareThroughput(setup: NsqBenchSetup, topic: string, n: number): Promise<Throughput> {
  const drain = drainClock('bare nsqjs', n, setup.prefetch);
  const r = await reader(setup, topic, (message) => {
    message.finish();
    drain.tick();
  });
  try {
    return await within(drain.done, setup.timeoutMs, 'bare throughput');
  } finally {
    r.close();
  }
}

/** A consumer of the lateness case, started: `done` resolves with the lateness once every message came back; `stop` closes it. */
export interface LatenessConsumer {
  readonly done: Promise<LatenessSummary>;
  stop(): Promise<void>;
}

/**
 * Each message of `topic` (body index `i`) is `REQ`d once with `delays[i]`
 * at its first delivery; lateness = the second delivery - (the `REQ` +
 * delay).
 */
export async function bareReqConsumer(setup: NsqBenchSetup, topic: string, delays: readonly number[]): Promise<LatenessConsumer> {
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
  return {
    done: handled.done.then(() => summariseLateness(lateness)),
    stop: async () => {
      r.close();
    },
  };
}
