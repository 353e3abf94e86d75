/**
 * The endpoint on a real NATS JetStream: a message that always fails takes
 * every immediate and delayed retry (held in the delay stream) and lands in
 * the error queue with its story; one that fails twice is handled once;
 * concurrency is never exceeded; a malformed body goes to the error queue.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { constant } from '../../src/backoff/constant.js';
import { jsonCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { HEADER } from '../../src/headers/names.js';
import { itRunsTheSharedEngineCases, waitFor } from './broker-cases.js';
import { decodeNatsHeaders } from '../../src/transports/jetstream/codec.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';

const skip = await natsSkipReason();


describe.skipIf(Boolean(skip))('the endpoint on JetStream', () => {
  const prefix = jetStreamPrefix('eng');
  const cleanups: (() => Promise<unknown>)[] = [];
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL, name: `${prefix}-admin` });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await deleteJetStreamPrefix(prefix);
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const transport = () => {
    const t = new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: `${prefix}-engine` });
    cleanups.push(() => t.close());
    return t;
  };

  it('retries at once, then later from the server, then dead-letters with the whole story', async () => {
    const t = transport();
    const attempts: number[] = [];
    const endpoint = new Endpoint<{ n: number }>({
      name: 'orders',
      transport: t,
      concurrency: 4,
      handler: () => {
        attempts.push(Date.now());
        throw new Error('always fails');
      },
      recoverability: { immediateRetries: 2, delayedRetries: 2, delayedBackoff: constant(300) },
    });
    cleanups.push(() => endpoint.stop());
    await endpoint.start();
    await t.send('orders', { id: 'm-1', body: jsonCodec.encode({ n: 1 }), headers: {} });
    await waitFor(() => endpoint.stats.deadLettered === 1, 15_000, 'the dead-letter');
    expect(attempts).toHaveLength(9);
    // Rounds of three immediate attempts, 300 ms apart, held by the server.
    expect(attempts[3]! - attempts[2]!).toBeGreaterThanOrEqual(290);
    expect(attempts[6]! - attempts[5]!).toBeGreaterThanOrEqual(290);
    const errorStream = t.names.of('error').stream;
    expect((await jsm.streams.info(errorStream)).state.messages).toBe(1);
    const stored = await jsm.streams.getMessage(errorStream, { seq: 1 });
    const decoded = decodeNatsHeaders(stored!.header);
    expect(decoded.id).toBe('m-1');
    expect(decoded.headers[HEADER.failureAttempts]).toBe('9');
    expect(decoded.headers[HEADER.failureReason]).toBe('retries-exhausted');
    expect(decoded.headers[HEADER.failureQueue]).toBe('orders');
    expect(decoded.headers[HEADER.failureStack]).toContain('always fails');
    expect((await jsm.streams.info(t.names.of('orders').stream)).state.messages).toBe(0);
    expect((await jsm.streams.info(t.names.delayStream)).state.messages).toBe(0);
  });

  itRunsTheSharedEngineCases(transport, cleanups);
});
