/**
 * An endpoint on JetStream makes its error queue's stream as it starts,
 * before any message fails: on a cluster, a stream first made by a
 * dead-letter while the cluster is cut apart may not survive the heal. A
 * prefix of this test's own, deleted afterwards.
 */
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { JetStreamNames } from '../../src/transports/jetstream/names.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';

const skip = await natsSkipReason();

describe.skipIf(Boolean(skip))('JetStream: the error queue exists from the start', () => {
  const prefix = jetStreamPrefix('eqstart');
  const opened: JetStreamTransport[] = [];
  const open = () => {
    const t = new JetStreamTransport({ servers: NATS_URL, prefix });
    opened.push(t);
    return t;
  };
  afterEach(async () => {
    for (const t of opened.splice(0)) await t.close();
    await deleteJetStreamPrefix(prefix);
  });

  /** Runs `use` with a stream manager on a connection of its own. */
  const withManager = async <T>(use: (jsm: JetStreamManager) => Promise<T>): Promise<T> => {
    const nc = await connect({ servers: NATS_URL, reconnect: false });
    try {
      return await use(await jetstreamManager(nc));
    } finally {
      await nc.close();
    }
  };
  const streamOf = (queue: string) => new JetStreamNames(prefix).of(queue).stream;
  /** Whether the stream of `queue` exists on the server. */
  const exists = (queue: string): Promise<boolean> =>
    withManager((jsm) =>
      jsm.streams.info(streamOf(queue)).then(
        () => true,
        () => false,
      ),
    );
  /** An endpoint on `t` whose handler always fails, with no retries: each message goes to `errorQueue`. */
  const failingEndpoint = (t: JetStreamTransport, queue: string, errorQueue: string) =>
    new Endpoint({
      name: 'eqstart',
      queue,
      transport: t,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
      handler: async () => {
        throw new Error('always fails');
      },
    });

  it('an endpoint makes its error stream as it starts, before any failure, and then dead-letters into it', async () => {
    const t = open();
    const endpoint = failingEndpoint(t, 'work', 'failed');
    expect(await exists('failed')).toBe(false);
    await endpoint.start();
    expect(await exists('failed')).toBe(true);
    const deadLettered = new Promise<string>((resolve) => endpoint.on('deadLettered', (e) => resolve(e.messageId)));
    await t.send('work', { id: 'm-1', body: new TextEncoder().encode('{}'), headers: {} });
    expect(await deadLettered).toBe('m-1');
    expect(await t.errorQueue.count('failed')).toBe(1);
    await endpoint.stop();
  });

  it('an error stream deleted after the start is made again by the next dead-letter', async () => {
    const t = open();
    const endpoint = failingEndpoint(t, 'work2', 'failed2');
    await endpoint.start();
    await withManager((jsm) => jsm.streams.delete(streamOf('failed2')));
    expect(await exists('failed2')).toBe(false);
    const deadLettered = new Promise<string>((resolve) => endpoint.on('deadLettered', (e) => resolve(e.messageId)));
    await t.send('work2', { id: 'm-2', body: new TextEncoder().encode('{}'), headers: {} });
    expect(await deadLettered).toBe('m-2');
    expect(await t.errorQueue.count('failed2')).toBe(1);
    await endpoint.stop();
  });

  it('a transport closed before the endpoint starts fails the start, naming the call', async () => {
    const t = open();
    await t.close();
    const endpoint = new Endpoint({ name: 'eqstart', queue: 'closed', transport: t, handler: async () => undefined });
    await expect(endpoint.start()).rejects.toThrow(/prepareErrorQueue/);
  });
});
