import type { JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { resolveJetStreamOptions } from '../../src/transports/jetstream/options.js';
import { Topology } from '../../src/transports/jetstream/topology.js';
import { FakeClock } from '../../src/time/fake-clock.js';

/** What the server answers a stream lookup with, in turn: a stream, or an error. */
type Answer = StreamInfo | Error;

const notFound = Object.assign(new Error('stream not found'), { code: 10059 });
const timeout = () => Object.assign(new Error('timeout'), { name: 'TimeoutError' });

function streamInfo(name: string, subject: string, leader: string | undefined): StreamInfo {
  return { config: { name, subjects: [subject], retention: 'workqueue' }, cluster: { name: 'c', leader } } as unknown as StreamInfo;
}

/** A manager whose stream lookups answer from `lookups` in turn (the last one for good), and whose create fails with `addError`. */
function manager(lookups: Answer[], addError: Error): { jsm: JetStreamManager; adds: () => number; lookups: () => number } {
  let adds = 0;
  let looked = 0;
  const streams = {
    info: async () => {
      const answer = lookups[Math.min(looked++, lookups.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
    add: async () => {
      adds++;
      throw addError;
    },
  };
  return { jsm: { streams } as unknown as JetStreamManager, adds: () => adds, lookups: () => looked };
}

async function settle<T>(clock: FakeClock, pending: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  let done: { value?: T; error?: unknown } | undefined;
  pending.then((value) => (done = { value }), (error: unknown) => (done = { error }));
  await clock.runUntil(() => done !== undefined, 60_000);
  return done!;
}

describe('JetStream topology: making a stream while the cluster elects its leader', () => {
  const clock = () => new FakeClock(1_000_000);

  it('finds the stream its own create made, once it has a leader, when the create timed out', async () => {
    const c = clock();
    const options = resolveJetStreamOptions({ clock: c, apiTimeoutMs: 5_000, replicas: 3 });
    const names = options.names.of('orders');
    const made = streamInfo(names.stream, names.subject, 'n2');
    const server = manager([notFound, timeout(), timeout(), made], timeout());
    const result = await settle(c, new Topology(server.jsm, options).queue('orders', 'work'));
    expect(result.error).toBeUndefined();
    expect(result.value?.stream).toBe(names.stream);
    expect(server.adds()).toBe(1);
    expect(server.lookups()).toBe(4);
  });

  it("rejects with the create's error when the stream is not there after all", async () => {
    const c = clock();
    const options = resolveJetStreamOptions({ clock: c, apiTimeoutMs: 5_000, replicas: 3 });
    const refused = Object.assign(new Error('insufficient resources'), { code: 10023 });
    const server = manager([notFound], refused);
    const result = await settle(c, new Topology(server.jsm, options).queue('orders', 'work'));
    expect(result.error).toBe(refused);
    expect(server.lookups()).toBe(2);
  });

  it("gives up after apiTimeoutMs of unanswered lookups, with the create's error", async () => {
    const c = clock();
    const options = resolveJetStreamOptions({ clock: c, apiTimeoutMs: 5_000, replicas: 3 });
    const created = timeout();
    const server = manager([notFound, timeout()], created);
    const started = c.monotonic();
    const result = await settle(c, new Topology(server.jsm, options).queue('orders', 'work'));
    expect(result.error).toBe(created);
    expect(c.monotonic() - started).toBeGreaterThanOrEqual(5_000);
    expect(c.monotonic() - started).toBeLessThan(5_500);
  });
});
