/**
 * The JetStream transport's debug lines name where the server stored each
 * publish and the stream sequence each delivery came from, so that a
 * confirmed send can be matched to what the stream later gave out under
 * its sequence. A prefix of this test's own, deleted afterwards.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Logger } from '../../src/logger.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';

const skip = await natsSkipReason();

describe.skipIf(Boolean(skip))('JetStream: debug lines of stored and handed-out messages', () => {
  const prefix = jetStreamPrefix('dbglog');
  let transport: JetStreamTransport | undefined;
  afterEach(async () => {
    await transport?.close();
    transport = undefined;
    await deleteJetStreamPrefix(prefix);
  });

  it('logs the stream sequence of a send, of its second send (a duplicate), and of its delivery', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger: Logger = { debug: (fields) => void lines.push({ ...fields }), info: () => undefined, warn: () => undefined, error: () => undefined };
    transport = new JetStreamTransport({ servers: NATS_URL, prefix, logger });
    const body = new TextEncoder().encode('x');
    await transport.send('work', { id: 'a', body, headers: {} });
    await transport.send('work', { id: 'b', body, headers: {} });
    await transport.send('work', { id: 'a', body, headers: {} });
    const stored = lines.filter((l) => l.msgId !== undefined);
    expect(stored.map((l) => [l.msgId, l.seq, l.duplicate])).toEqual([
      ['a', 1, false],
      ['b', 2, false],
      ['a', 1, true],
    ]);
    const got: string[] = [];
    const sub = await transport.consume('work', (d) => void d.ack().then(() => got.push(d.id)), { prefetch: 2 });
    for (let waited = 0; got.length < 2 && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    await sub.close();
    const handedOut = lines.filter((l) => l.deliveryCount !== undefined);
    expect(handedOut.map((l) => [l.messageId, l.seq, l.deliveryCount])).toEqual([
      ['a', 1, 1],
      ['b', 2, 1],
    ]);
    expect(handedOut.every((l) => l.stream === stored[0]!.stream)).toBe(true);
  });
});
