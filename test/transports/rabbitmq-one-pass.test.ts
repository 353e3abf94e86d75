/**
 * One-pass error-queue operations on a real RabbitMQ: each message read
 * once (counted with the operations' `stats.reads`), queues of thousands of
 * entries listed, exported and sent back by the CLI, two retries of the same
 * group at once sending each entry exactly once between them, and quorum
 * error queues refused. Listing thousands of entries gives them all back to
 * the broker at once, so the file runs on a RabbitMQ node of its own,
 * stopped (with everything on it) after the file.
 */
import { randomUUID } from 'node:crypto';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { QuorumErrorQueueError, RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { cli, wrap } from '../cli/support.js';
import { RabbitCluster, rabbitNodeSkipReason } from '../support/rabbit-node.js';

const skip = rabbitNodeSkipReason();
const run = randomUUID().slice(0, 8);
/** The size of the queue listed, exported and sent back in one pass each. */
const LARGE = 3_000;

describe.skipIf(Boolean(skip))('RabbitMQ error queues in one pass', () => {
  let node: RabbitCluster;
  let url: string;
  let admin: ChannelModel;
  let publish: ConfirmChannel;
  const transports: RabbitMqTransport[] = [];

  const queueName = (what: string) => {
    const name = `onepass-${what}-${run}-${randomUUID().slice(0, 6)}`;
    return name;
  };

  /** A transport whose operations count their reads; the CLI's close leaves it open for the test to read them. */
  const open = (options: { allowQuorumErrorQueueReads?: boolean } = {}) => {
    const t = new RabbitMqTransport({ url: url, connectionName: `redeliver-test-one-pass-${run}`, topologyPrefix: `onepass-${run}`, ...options });
    transports.push(t);
    return t;
  };

  const kept = (t: RabbitMqTransport) => async (): Promise<Transport> => wrap(t);

  beforeAll(async () => {
    node = await RabbitCluster.start({ namePrefix: 'rmqonepass' });
    url = node.url();
    admin = await amqp.connect(url);
    publish = await admin.createConfirmChannel();
  }, 120_000);

  afterAll(async () => {
    for (const t of transports) await t.close();
    await admin?.close().catch(() => undefined);
    // The node goes with every queue and exchange on it.
    await node?.stop();
  }, 60_000);

  /**
   * Puts `count` failed messages of `queue` on `errorQueue` as the transport
   * dead-letters them: every third a ValidationError, the others a
   * TimeoutError. Resolves the message ids of each group.
   */
  async function fill(errorQueue: string, queue: string, count: number, args: Record<string, unknown> = {}): Promise<{ timeout: string[]; invalid: string[] }> {
    await publish.assertQueue(queue, { durable: true });
    await publish.assertQueue(errorQueue, { durable: true, arguments: args });
    const ids = { timeout: [] as string[], invalid: [] as string[] };
    for (let i = 0; i < count; i++) {
      const invalid = i % 3 === 0;
      const id = `m-${i}`;
      (invalid ? ids.invalid : ids.timeout).push(id);
      publish.sendToQueue(errorQueue, Buffer.from(`body ${i}`), {
        persistent: true,
        messageId: id,
        headers: {
          [HEADER.entryId]: randomUUID(),
          [HEADER.failureQueue]: queue,
          [HEADER.failureReason]: 'retries-exhausted',
          [HEADER.failureErrorName]: invalid ? 'ValidationError' : 'TimeoutError',
          [HEADER.failureMessage]: invalid ? `field ${i} is invalid` : `timed out after ${i} ms`,
          [HEADER.failureTime]: new Date(1_700_000_000_000 + i).toISOString(),
        },
      });
      if (i % 1_000 === 999) await publish.waitForConfirms();
    }
    await publish.waitForConfirms();
    return ids;
  }

  async function depth(queue: string): Promise<number> {
    return (await publish.checkQueue(queue)).messageCount;
  }

  /** Waits (up to a minute) until `queue` counts `n` ready messages again. */
  async function untilDepth(queue: string, n: number): Promise<void> {
    const deadline = Date.now() + 60_000;
    while ((await depth(queue)) !== n) {
      if (Date.now() > deadline) throw new Error(`${queue} did not get back to ${n} ready messages within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Takes every message off `queue` (acking it): their message ids. */
  async function drainIds(queue: string): Promise<string[]> {
    const channel = await admin.createChannel();
    const ids: string[] = [];
    for (let m = await channel.get(queue, { noAck: true }); m; m = await channel.get(queue, { noAck: true })) ids.push(String(m.properties.messageId));
    await channel.close();
    return ids;
  }

  async function signatureOf(t: RabbitMqTransport, errorQueue: string, errorName: string): Promise<string> {
    const listed = await cli(['errors', 'list', url, '--error-queue', errorQueue, '--json'], { openTransport: kept(t) });
    return JSON.parse(listed.stdout).groups.find((g: { errorName: string }) => g.errorName === errorName).signature;
  }

  it('reads each message once: errors list over 3,000 entries makes 3,000 basic.get requests', { timeout: 120_000 }, async () => {
    const errorQueue = queueName('reads');
    await fill(errorQueue, queueName('reads-work'), 3_000);
    const t = open();
    const listed = await cli(['errors', 'list', url, '--error-queue', errorQueue, '--json'], { openTransport: kept(t) });
    expect(listed.code).toBe(0);
    const json = JSON.parse(listed.stdout);
    expect(json.total).toBe(3_000);
    expect(json.groups.map((g: { count: number }) => g.count).sort()).toEqual([1_000, 2_000]);
    // The snapshot holds 3,000 messages: the pass stops after the 3,000th, without an empty get.
    expect(t.errorQueue.stats.reads).toBe(3_000);
    expect(await depth(errorQueue)).toBe(3_000);

    const before = t.errorQueue.stats.reads;
    let scanned = 0;
    for await (const page of t.errorQueue.scan(errorQueue, { pageSize: 700 })) scanned += page.length;
    expect(scanned).toBe(3_000);
    expect(t.errorQueue.stats.reads - before).toBe(3_000);
  });

  // 3,000 entries, as in the other tests here: each pass is one basic.get per entry, so a larger queue only takes longer.
  it(`lists, exports and sends back a group of a ${LARGE.toLocaleString('en')}-entry queue in one pass each`, { timeout: 300_000 }, async () => {
    const errorQueue = queueName('large');
    const queue = queueName('large-work');
    const ids = await fill(errorQueue, queue, LARGE);
    const t = open();
    const args = ['--error-queue', errorQueue];

    let started = Date.now();
    const listed = await cli(['errors', 'list', url, ...args, '--json'], { openTransport: kept(t) });
    const listMs = Date.now() - started;
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout).total).toBe(LARGE);

    // The broker takes the messages given back over a few seconds; an operator's next command comes after that.
    await untilDepth(errorQueue, LARGE);
    started = Date.now();
    const exported = await cli(['errors', 'export', url, ...args], { openTransport: kept(t) });
    const exportMs = Date.now() - started;
    expect(exported.stderr).toBe('');
    expect(exported.code).toBe(0);
    expect(exported.stdout.trimEnd().split('\n')).toHaveLength(LARGE);

    const signature = JSON.parse(listed.stdout).groups.find((g: { errorName: string }) => g.errorName === 'TimeoutError').signature;
    const readsBefore = t.errorQueue.stats.reads;
    await untilDepth(errorQueue, LARGE);
    started = Date.now();
    const retried = await cli(['errors', 'retry', url, '--group', signature, ...args, '--json'], { openTransport: kept(t) });
    const retryMs = Date.now() - started;
    expect(retried.stderr).toBe('');
    expect(retried.code).toBe(0);
    expect(JSON.parse(retried.stdout)).toMatchObject({ sentBack: ids.timeout.length, alreadyGone: 0, refused: 0, failed: 0, unseen: 0, read: LARGE });
    expect(t.errorQueue.stats.reads - readsBefore).toBe(LARGE);
    expect(await depth(errorQueue)).toBe(ids.invalid.length);
    expect((await drainIds(queue)).sort()).toEqual([...ids.timeout].sort());
    console.log(`${LARGE} entries: list ${listMs} ms, export ${exportMs} ms, retry --group (${ids.timeout.length}) ${retryMs} ms`);
  });

  it('two retries of the same group at once send each entry exactly once between them, and say what they did not see', { timeout: 300_000 }, async () => {
    const errorQueue = queueName('race');
    const queue = queueName('race-work');
    const ids = await fill(errorQueue, queue, 3_000);
    const [a, b] = [open(), open()];
    const signature = await signatureOf(a, errorQueue, 'TimeoutError');
    const args = ['errors', 'retry', url, '--group', signature, '--error-queue', errorQueue, '--json'];
    const [first, second] = await Promise.all([cli(args, { openTransport: kept(a) }), cli(args, { openTransport: kept(b) })]);
    const outputs = [first, second].map((r) => JSON.parse(r.stdout));
    // Between them, every entry of the group went exactly once.
    expect(outputs[0].sentBack + outputs[1].sentBack).toBe(ids.timeout.length);
    const sent = await drainIds(queue);
    expect(sent).toHaveLength(ids.timeout.length);
    expect(new Set(sent).size).toBe(ids.timeout.length);
    expect([...sent].sort()).toEqual([...ids.timeout].sort());
    expect(await depth(errorQueue)).toBe(ids.invalid.length);
    for (const [i, r] of [first, second].entries()) {
      const o = outputs[i];
      expect(o).toMatchObject({ alreadyGone: 0, refused: 0, failed: 0 });
      // Each run read or reports as unseen no more than the queue held; a run that missed entries says so and exits 3.
      expect(o.read + o.unseen).toBeLessThanOrEqual(3_000);
      if (o.unseen > 0) {
        expect(r.code).toBe(3);
        expect(r.stderr).toContain(`${o.unseen} ${o.unseen === 1 ? 'entry' : 'entries'} in error queue '${errorQueue}' when this run began`);
      } else expect(r.code).toBe(0);
    }
    console.log(`concurrent retries: ${JSON.stringify(outputs)}`);
    // Run again after both: nothing of the group is left, and nothing is unseen.
    const again = await cli(args, { openTransport: kept(a) });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ sentBack: 0, unseen: 0, read: ids.invalid.length });
  });

  it('refuses a quorum error queue in place, giving back the message read, unless allowed', { timeout: 60_000 }, async () => {
    const errorQueue = queueName('quorum');
    const queue = queueName('quorum-work');
    await fill(errorQueue, queue, 5, { 'x-queue-type': 'quorum' });
    const t = open();
    const listed = await cli(['errors', 'list', url, '--error-queue', errorQueue], { openTransport: kept(t) });
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(`'${errorQueue}' is a quorum queue`);
    expect(listed.stderr).toContain('redeliver errors ingest');
    expect(listed.stderr).toContain('allowQuorumErrorQueueReads');
    expect(t.errorQueue.stats.reads).toBe(1);
    await expect(t.errorQueue.browse(errorQueue)).rejects.toBeInstanceOf(QuorumErrorQueueError);
    await expect(t.errorQueue.sendBackEach(errorQueue, { select: () => true })).rejects.toBeInstanceOf(QuorumErrorQueueError);
    // A quorum queue applies the give-back through its log: a passive declaration can answer before it counts
    // the entry again (4 of 5 seen once under load), so wait for all five rather than read the depth once.
    await untilDepth(errorQueue, 5);

    const allowed = open({ allowQuorumErrorQueueReads: true });
    let seen = 0;
    for await (const page of allowed.errorQueue.scan(errorQueue)) seen += page.length;
    expect(seen).toBe(5);
    const summary = await allowed.errorQueue.sendBackEach(errorQueue, { select: () => true });
    expect(summary).toMatchObject({ read: 5, done: 5 });
    expect((await drainIds(queue)).sort()).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4']);
  });
});

