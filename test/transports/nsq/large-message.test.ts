/**
 * A 1 MB message with non-ASCII headers through send, consume, retryLater
 * and deadLetter on an nsqd of the test's own with nsqd's default
 * `--max-msg-size` (1 MiB, 1,048,576 bytes; nsqlookupd on 4386/4387, nsqd
 * on 4388/4389), and what the envelope does at that edge: nsqd's limit
 * counts the whole body, envelope included, so a body of exactly 1 MiB is
 * refused before it is sent, and the largest body that goes is 1 MiB less
 * the envelope (13 bytes, plus the headers and the message id).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../../src/headers/names.js';
import type { Delivery } from '../../../src/transport/types.js';
import { MessageTooLargeError, NsqTransport } from '../../../src/transports/nsq/index.js';
import { wrap } from '../../../src/transports/nsq/codec.js';
import { ENVELOPE_OVERHEAD } from '../../../src/transports/nsq/envelope.js';
import { DEFAULT_ERROR_CHANNEL } from '../../../src/transports/nsq/operations.js';
import { NsqNodes, nsqNodeSkipReason } from '../../support/nsq-node.js';
import { channelEmpty, nsqdHttp, topicName, until } from './support.js';

const skip = nsqNodeSkipReason();
const MIB = 1_048_576;
let nodes: NsqNodes;

beforeAll(async () => {
  if (!skip) nodes = await NsqNodes.start({ basePort: 4386, nodes: 1 });
}, 60_000);
afterAll(async () => {
  await nodes?.stop();
});

function transport(channel?: string): NsqTransport {
  return new NsqTransport({
    nsqd: [nodes.tcpAddress(1)],
    httpAddresses: { [nodes.tcpAddress(1)]: nodes.httpAddress(1) },
    connectionBackoff: () => 100,
    ...(channel === undefined ? {} : { channel }),
  });
}

const HEADERS = { 'x-kunde': 'Müller & Søn', 'x-城市': '東京 🚀', 'x-note': 'naïve café — “quoted”' };

describe.skipIf(Boolean(skip))("a 1 MB message at nsqd's default --max-msg-size", () => {
  it('send, consume, retryLater and deadLetter carry the body byte for byte and the headers as written', async () => {
    const t = transport();
    const topic = topicName('mb');
    const errorQueue = `${topic}.error`;
    const body = new Uint8Array(randomBytes(1_000_000));
    const got: Delivery[] = [];
    await t.consume(topic, (d) => got.push(d), { prefetch: 1 });
    await t.send(topic, { id: 'ünï-1', body, headers: HEADERS });
    await until('the message', () => got.length === 1, 10_000);
    expect(got[0]!.id).toBe('ünï-1');
    expect(got[0]!.headers).toEqual(HEADERS);
    expect(Buffer.from(got[0]!.body).equals(Buffer.from(body))).toBe(true);

    const retryHeaders = { ...HEADERS, [HEADER.delayedAttempts]: '1', [HEADER.history]: JSON.stringify([{ message: 'Zeitüberschreitung beim Lesen ✗', errorName: 'Error' }]) };
    await got[0]!.retryLater(200, retryHeaders);
    await until('the retry copy', () => got.length === 2, 10_000);
    expect(got[1]!.id).toBe('ünï-1');
    expect(got[1]!.headers).toEqual(retryHeaders);
    expect(Buffer.from(got[1]!.body).equals(Buffer.from(body))).toBe(true);

    const failure = { ...retryHeaders, [HEADER.failureReason]: 'retries-exhausted', [HEADER.failureMessage]: 'Zeitüberschreitung ✗', [HEADER.failureQueue]: topic };
    await got[1]!.deadLetter(errorQueue, failure);
    const reader = transport(DEFAULT_ERROR_CHANNEL);
    const entries: Delivery[] = [];
    await reader.consume(errorQueue, (d) => {
      entries.push(d);
      void d.ack();
    }, { prefetch: 1 });
    await until('the error-queue entry', () => entries.length === 1, 10_000);
    expect(entries[0]!.id).toBe('ünï-1');
    expect(entries[0]!.headers).toEqual(failure);
    expect(Buffer.from(entries[0]!.body).equals(Buffer.from(body))).toBe(true);
    // The original was finished: nsqd holds nothing of it on the queue's channel, so nothing comes back.
    await until('the original finished', () => channelEmpty(nsqdHttp(nodes.httpAddress(1)), topic));
    expect(got).toHaveLength(2);
    await reader.close();
    await t.close();
  }, 30_000);

  it('at the edge: a body of 1 MiB is refused before it is sent (the envelope takes it over); 1 MiB less the envelope goes', async () => {
    const t = transport();
    const topic = topicName('mib');
    expect((await t.nodes.node(nodes.tcpAddress(1)).limits()).maxMessageBytes).toBe(MIB);
    const envelope = wrap('edge', HEADERS, new Uint8Array(0)).byteLength;
    // The fixed part, and the header block: the message id and the headers, each with its two lengths.
    expect(envelope).toBeGreaterThan(ENVELOPE_OVERHEAD);
    expect(envelope).toBe(ENVELOPE_OVERHEAD + 4 + 8 + Buffer.byteLength('redeliver-message-idedge') + Object.entries(HEADERS).reduce((n, [k, v]) => n + 8 + Buffer.byteLength(k) + Buffer.byteLength(v), 0));
    const error = await t.send(topic, { id: 'edge', body: new Uint8Array(MIB), headers: HEADERS }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect((error as MessageTooLargeError).bytes).toBe(MIB + envelope);
    await t.send(topic, { id: 'edge', body: new Uint8Array(MIB - envelope), headers: HEADERS });
    const got: Delivery[] = [];
    await t.consume(topic, (d) => got.push(d), { prefetch: 1 });
    await until('the message at the edge', () => got.length === 1, 10_000);
    expect(got[0]!.body.byteLength).toBe(MIB - envelope);
    expect(got[0]!.headers).toEqual(HEADERS);
    await got[0]!.ack();
    await t.close();
  }, 30_000);
});
