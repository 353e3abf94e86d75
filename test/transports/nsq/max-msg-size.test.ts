/**
 * nsqd's `--max-msg-size` on an nsqd of the test's own started with 4096
 * (nsqlookupd on 4382/4383, nsqd on 4384/4385; 4369 is epmd's):
 *
 * - a send whose envelope is over it is refused with a
 *   `MessageTooLargeError` before anything is sent: nothing is published,
 *   the publishing connection stays open and the next send goes through it;
 * - a retry or error-queue copy that would be over it goes with its failure
 *   history and stack cut to fit, logged;
 * - a copy that fits not even so: `retryLater` rejects with a
 *   `MessageTooLargeError` and the delivery stays held; `deadLetter` moves
 *   the message to the error topic as it arrived, logged; an endpoint
 *   failing such a message moves it to the error queue after one run,
 *   nothing lost, no loop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bytesCodec } from '../../../src/codec.js';
import { Endpoint } from '../../../src/endpoint/endpoint.js';
import { HEADER } from '../../../src/headers/names.js';
import type { Delivery } from '../../../src/transport/types.js';
import { MessageTooLargeError, NsqTransport } from '../../../src/transports/nsq/index.js';
import { wrap } from '../../../src/transports/nsq/codec.js';
import { DEFAULT_ERROR_CHANNEL } from '../../../src/transports/nsq/operations.js';
import { NsqNodes, nsqNodeSkipReason } from '../../support/nsq-node.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { channelEmpty, nsqdHttp, topicName, until } from './support.js';

const skip = nsqNodeSkipReason();
const MAX = 4096;
let nodes: NsqNodes;

beforeAll(async () => {
  if (!skip) nodes = await NsqNodes.start({ basePort: 4382, nodes: 1, maxMsgSize: MAX });
}, 60_000);
afterAll(async () => {
  await nodes?.stop();
});

function transport(logger = recordingLogger(), channel?: string): NsqTransport {
  return new NsqTransport({
    nsqd: [nodes.tcpAddress(1)],
    httpAddresses: { [nodes.tcpAddress(1)]: nodes.httpAddress(1) },
    connectionBackoff: () => 100,
    logger,
    ...(channel === undefined ? {} : { channel }),
  });
}

/** A body whose envelope, with `headers` and id `id`, takes `total` bytes. */
function bodyOfEnvelope(total: number, id: string, headers: Record<string, string> = {}): Uint8Array {
  const overhead = wrap(id, headers, new Uint8Array(0)).byteLength;
  return new Uint8Array(total - overhead).fill(0x61);
}

interface ProducerStats {
  remote_address: string;
}

async function producers(): Promise<ProducerStats[]> {
  const stats = (await nodes.get(1, '/stats?format=json')) as { producers: ProducerStats[] | null };
  return stats.producers ?? [];
}

async function topicCount(topic: string): Promise<number> {
  return (await nsqdHttp(nodes.httpAddress(1)).stats()).topics.find((t) => t.topic_name === topic)?.message_count ?? 0;
}

/** Every message on `topic` as the error channel holds it (a consumer of that channel acks each). */
async function readErrorTopic(topic: string, expected: number): Promise<Delivery[]> {
  const reader = transport(recordingLogger(), DEFAULT_ERROR_CHANNEL);
  const got: Delivery[] = [];
  await reader.consume(topic, (d) => {
    got.push(d);
    void d.ack();
  }, { prefetch: 10 });
  await until(`${expected} entries on ${topic}`, () => got.length >= expected, 10_000);
  await reader.close();
  return got;
}

describe.skipIf(Boolean(skip))("nsqd's --max-msg-size (4096)", () => {
  it('a send over it is refused before it is sent; the connection stays open and the next send works', async () => {
    const t = transport();
    const topic = topicName('big-send');
    await t.send(topic, { id: 'first', body: new Uint8Array(10), headers: {} });
    const before = await producers();
    expect(before).toHaveLength(1);
    const error = await t.send(topic, { id: 'big', body: bodyOfEnvelope(MAX + 1, 'big'), headers: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect((error as MessageTooLargeError).bytes).toBe(MAX + 1);
    expect((error as MessageTooLargeError).maxMessageBytes).toBe(MAX);
    expect(t.classifySendError(error)).toBe('fatal');
    // Exactly at the limit is taken.
    await t.send(topic, { id: 'edge', body: bodyOfEnvelope(MAX, 'edge'), headers: {} });
    expect(await topicCount(topic)).toBe(2);
    const after = await producers();
    expect(after.map((p) => p.remote_address)).toEqual(before.map((p) => p.remote_address));
    await t.close();
  }, 20_000);

  it('a retry copy over it goes with its failure history cut to fit, logged', async () => {
    const logger = recordingLogger();
    const t = transport(logger);
    const topic = topicName('big-retry');
    const got: Delivery[] = [];
    await t.consume(topic, (d) => got.push(d), { prefetch: 1 });
    await t.send(topic, { id: 'm', body: bodyOfEnvelope(MAX - 600, 'm'), headers: { keep: 'ü' } });
    await until('the message', () => got.length === 1);
    const history = JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ at: new Date(0).toISOString(), errorName: 'Error', message: `failure ${i} `.padEnd(80, '-'), immediateAttempt: 1, delayedAttempt: i })));
    await got[0]!.retryLater(0, { keep: 'ü', [HEADER.delayedAttempts]: '1', [HEADER.history]: history });
    await until('the copy', () => got.length === 2);
    const copy = got[1]!;
    expect(copy.id).toBe('m');
    expect(copy.headers['keep']).toBe('ü');
    expect(copy.headers[HEADER.delayedAttempts]).toBe('1');
    const kept = JSON.parse(copy.headers[HEADER.history] ?? '[]') as { message: string }[];
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(10);
    // The newest entries stay.
    expect(kept.at(-1)!.message).toContain('failure 9');
    expect(logger.lines.some((l) => l.level === 'warn' && /did not fit nsqd's --max-msg-size \(4096\).*cut: redeliver-history/.test(l.message))).toBe(true);
    await copy.ack();
    await t.close();
  }, 20_000);

  it('a retry copy that cannot fit at all: retryLater rejects with MessageTooLargeError, nothing sent, the delivery still held', async () => {
    const t = transport();
    const topic = topicName('big-req');
    const got: Delivery[] = [];
    await t.consume(topic, (d) => got.push(d), { prefetch: 1 });
    await t.send(topic, { id: 'edge', body: bodyOfEnvelope(MAX - 4, 'edge', { keep: 'é' }), headers: { keep: 'é' } });
    await until('the message', () => got.length === 1);
    const refused = await got[0]!.retryLater(300, { keep: 'é', [HEADER.delayedAttempts]: '1', [HEADER.lastDelay]: '300' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MessageTooLargeError);
    // Still held: it can be settled otherwise, and nothing else reached the topic.
    await got[0]!.ack();
    expect(await topicCount(topic)).toBe(1);
    await t.close();
  }, 20_000);

  it('an error-queue copy that cannot fit at all: the message goes to the error topic as it arrived, logged, and is finished', async () => {
    const logger = recordingLogger();
    const t = transport(logger);
    const topic = topicName('big-dl');
    const errorQueue = `${topic}.error`;
    const got: Delivery[] = [];
    await t.consume(topic, (d) => got.push(d), { prefetch: 1 });
    await t.send(topic, { id: 'edge', body: bodyOfEnvelope(MAX, 'edge', { keep: 'ж' }), headers: { keep: 'ж' } });
    await until('the message', () => got.length === 1);
    await got[0]!.deadLetter(errorQueue, { keep: 'ж', [HEADER.failureReason]: 'retries-exhausted', [HEADER.failureMessage]: 'boom', [HEADER.failureQueue]: topic });
    const [entry] = await readErrorTopic(errorQueue, 1);
    expect(entry!.id).toBe('edge');
    expect(entry!.headers).toEqual({ keep: 'ж' });
    expect(entry!.body).toEqual(got[0]!.body);
    expect(logger.lines.some((l) => l.level === 'error' && new RegExp(`deadLetter copy of message 'edge'.*moved to ${errorQueue.replace(/\./g, '\\.')} as it arrived`).test(l.message))).toBe(true);
    // The original was finished: nsqd holds nothing of it on the queue's channel, so nothing comes back.
    await until('the original finished', () => channelEmpty(nsqdHttp(nodes.httpAddress(1)), topic));
    expect(got).toHaveLength(1);
    await t.close();
  }, 20_000);

  it('an endpoint: a message whose retry copy cannot fit goes to the error queue after one run (reason copy-too-large logged), not in a loop', async () => {
    const logger = recordingLogger();
    const t = transport(logger);
    const topic = topicName('big-ep');
    const errorQueue = `${topic}.error`;
    const runs: number[] = [];
    const endpoint = new Endpoint({
      name: topic,
      transport: t,
      concurrency: 1,
      logger,
      codec: bytesCodec,
      recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: () => 400, errorQueue },
      handler: () => {
        runs.push(Date.now());
        throw new Error('always');
      },
    });
    await endpoint.start();
    await t.send(topic, { id: 'edge', body: bodyOfEnvelope(MAX - 2, 'edge'), headers: {} });
    const [entry] = await readErrorTopic(errorQueue, 1);
    expect(entry!.id).toBe('edge');
    expect(runs).toHaveLength(1);
    expect(endpoint.stats.deadLettered).toBe(1);
    expect(logger.lines.some((l) => l.level === 'error' && /retry copy of message 'edge' is larger than its broker takes.*moving it to the error queue/.test(l.message))).toBe(true);
    await endpoint.stop();
    await t.close();
  }, 20_000);
});
