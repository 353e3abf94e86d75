/**
 * What the transport makes of what nsqd says, on the shared nsqd: its
 * error frames (E_BAD_TOPIC, E_BAD_MESSAGE) and how a producer classes
 * them and E_PUB_FAILED, names refused before anything is sent, messages
 * not written by redeliver (plain and malformed envelopes), and an
 * endpoint's default error queue `<topic>.error`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Endpoint } from '../../../src/endpoint/endpoint.js';
import { UnrecoverableError } from '../../../src/policy/errors.js';
import type { Logger } from '../../../src/logger.js';
import type { Delivery } from '../../../src/transport/types.js';
import { ENVELOPE_MAGIC, InvalidNameError, NsqPublishError, NsqRefusedError, NsqTransport, classifyNsqSendError } from '../../../src/transports/nsq/index.js';
import { publishError } from '../../../src/transports/nsq/send-errors.js';
import { sendJson } from '../../support/engine-harness.js';
import { deleteNsqTopics, nsqdHttp, nsqSkipReason, NSQD_TCP, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const api = nsqdHttp();
const made: string[] = [];
afterAll(async () => {
  if (!skip) await deleteNsqTopics(api, (name) => made.some((t) => name.startsWith(t)));
});

function queue(label: string): string {
  const name = topicName(label);
  made.push(name);
  return name;
}

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info: () => undefined, error: () => undefined, warn: (_f, message) => warnings.push(message) };
}

describe('nsq: nsqd error frames, classified', () => {
  it('E_PUB_FAILED, E_MPUB_FAILED and E_DPUB_FAILED are transient; E_BAD_TOPIC, E_BAD_MESSAGE and E_INVALID fatal with nsqd reason', () => {
    for (const code of ['E_PUB_FAILED', 'E_MPUB_FAILED', 'E_DPUB_FAILED']) {
      const error = publishError(`${code} PUB failed exiting`, '127.0.0.1:4150');
      expect(error).toBeInstanceOf(NsqPublishError);
      expect((error as NsqPublishError).code).toBe(code);
      expect(classifyNsqSendError(error)).toBe('transient');
    }
    for (const code of ['E_BAD_TOPIC', 'E_BAD_MESSAGE', 'E_INVALID']) {
      const error = publishError(`Error: ${code} the reason`, '127.0.0.1:4150');
      expect(error).toBeInstanceOf(NsqRefusedError);
      expect((error as NsqRefusedError).code).toBe(code);
      expect((error as NsqRefusedError).reason).toBe('the reason');
      expect(classifyNsqSendError(error)).toBe('fatal');
    }
    expect(classifyNsqSendError(new NsqPublishError(undefined, 'a:1', 'no answer'))).toBe('transient');
  });

  it('names nsqd would refuse are refused before sending, as fatal; #ephemeral and 64 characters are taken', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP] });
    for (const bad of ['has space', 'x'.repeat(65), 'a/b', '', 'a#ephemeral#ephemeral', 'é']) {
      const sending = transport.send(bad, { id: 'n', body: new Uint8Array(1), headers: {} });
      if (bad === '') await expect(sending).rejects.toThrow();
      else {
        const error = await sending.catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidNameError);
        expect(classifyNsqSendError(error)).toBe('fatal');
      }
    }
    await expect(transport.consume('no/slash', () => undefined, { prefetch: 1 })).rejects.toBeInstanceOf(InvalidNameError);
    const long = queue('n').padEnd(64, 'x');
    await expect(transport.send(long, { id: 'n', body: new Uint8Array(1), headers: {} })).resolves.toBeUndefined();
    await transport.close();
  });
});

describe.skipIf(Boolean(skip))('nsq: nsqd error frames on the real nsqd', () => {
  it('E_BAD_TOPIC and E_BAD_MESSAGE come back as NsqRefusedError with nsqd reason; the next publish opens a new connection', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 50 });
    const publisher = transport.nodes.node(NSQD_TCP).publisher;
    const badTopic = await publisher.publish('bad*topic', [Buffer.from('x')]).catch((e: unknown) => e);
    expect(badTopic).toBeInstanceOf(NsqRefusedError);
    expect((badTopic as NsqRefusedError).code).toBe('E_BAD_TOPIC');
    expect((badTopic as NsqRefusedError).reason).toMatch(/bad\*topic/);
    expect(classifyNsqSendError(badTopic)).toBe('fatal');
    const q = queue('badmsg');
    const empty = await publisher.publish(q, [Buffer.alloc(0)]).catch((e: unknown) => e);
    expect(empty).toBeInstanceOf(NsqRefusedError);
    expect((empty as NsqRefusedError).code).toBe('E_BAD_MESSAGE');
    expect(classifyNsqSendError(empty)).toBe('fatal');
    // nsqd closed the connection after the fatal error; the publisher opens another.
    await until('a publish after the refusals', async () => transport.send(q, { id: 'ok', body: new Uint8Array(1), headers: {} }).then(() => true, () => false), 5_000);
    expect((await api.topicStats(q))?.message_count).toBe(1);
    await transport.close();
  });
});

describe.skipIf(Boolean(skip))('nsq: messages not written by redeliver', () => {
  it('plain and malformed bodies are delivered as they are, with nsqd id and attempts, each kind warned about once per queue', async () => {
    const logger = recordingLogger();
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 100, logger });
    const q = queue('plain');
    await transport.topology.createQueue(q);
    const malformed = Uint8Array.of(...ENVELOPE_MAGIC, 1, 0xff, 0xff, 0xff, 0xff, 0x41);
    await api.publish(q, new TextEncoder().encode('plain-1'));
    await api.publish(q, new TextEncoder().encode('plain-2'));
    await api.publish(q, malformed);
    await api.publish(q, malformed);
    const got: Delivery[] = [];
    await transport.consume(q, (d) => got.push(d), { prefetch: 10 });
    await until('four deliveries', () => got.length === 4);
    const bodies = got.map((d) => Buffer.from(d.body));
    expect(bodies.filter((b) => b.toString() === 'plain-1' || b.toString() === 'plain-2')).toHaveLength(2);
    expect(bodies.filter((b) => b.equals(Buffer.from(malformed)))).toHaveLength(2);
    for (const d of got) {
      expect(d.id).toMatch(/^[0-9a-f]{16}$/);
      expect(d.id).toBe((d as unknown as { nsqId: string }).nsqId);
      expect(d.headers).toEqual({});
      expect(d.deliveryCount).toBe(1);
    }
    const again = got[0]!;
    await again.release();
    await until('the released message again', () => got.length === 5);
    expect(got[4]!.id).toBe(again.id);
    expect(got[4]!.deliveryCount).toBe(2);
    await Promise.all(got.slice(1).map((d) => d.ack()));
    expect(logger.warnings.filter((w) => w.includes('not written by redeliver'))).toHaveLength(1);
    expect(logger.warnings.filter((w) => w.includes('malformed'))).toHaveLength(1);
    await transport.close();
  });
});

describe.skipIf(Boolean(skip))('nsq: an endpoint with no errorQueue', () => {
  it('moves a message it gives up on to <topic>.error', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 100 });
    const q = queue('deferr');
    const endpoint = new Endpoint<{ n: number }>({
      name: q,
      transport,
      handler: () => {
        throw new UnrecoverableError('no');
      },
    });
    await endpoint.start();
    await sendJson(transport, q, 'gives-up', { n: 1 });
    const got: Delivery[] = [];
    const errors = await transport.consume(`${q}.error`, (d) => got.push(d), { prefetch: 1 });
    await until('the entry in <topic>.error', () => got.length === 1);
    expect(got[0]!.id).toBe('gives-up');
    await got[0]!.ack();
    await errors.close();
    await endpoint.stop();
    await transport.close();
  });
});
