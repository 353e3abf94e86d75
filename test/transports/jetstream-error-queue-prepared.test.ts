/**
 * An endpoint on JetStream makes its error queue's stream as it starts,
 * before any message fails: on a cluster, a stream first made by a
 * dead-letter while the cluster is cut apart may not survive the heal. A
 * prefix of this test's own, deleted afterwards.
 */
import { jetstreamManager } from '@nats-io/jetstream';
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

  /** Whether the stream of `queue` exists on the server. */
  const exists = async (queue: string): Promise<boolean> => {
    const nc = await connect({ servers: NATS_URL, reconnect: false });
    try {
      const jsm = await jetstreamManager(nc);
      return await jsm.streams.info(new JetStreamNames(prefix).of(queue).stream).then(
        () => true,
        () => false,
      );
    } finally {
      await nc.close();
    }
  };

  it('an endpoint makes its error stream as it starts, before any failure, and then dead-letters into it', async () => {
    const t = open();
    const endpoint = new Endpoint({
      name: 'eqstart',
      queue: 'work',
      transport: t,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue: 'failed' },
      handler: async () => {
        throw new Error('always fails');
      },
    });
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
    const endpoint = new Endpoint({
      name: 'eqstart',
      queue: 'work2',
      transport: t,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue: 'failed2' },
      handler: async () => {
        throw new Error('always fails');
      },
    });
    await endpoint.start();
    const nc = await connect({ servers: NATS_URL, reconnect: false });
    try {
      await (await jetstreamManager(nc)).streams.delete(new JetStreamNames(prefix).of('failed2').stream);
    } finally {
      await nc.close();
    }
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
