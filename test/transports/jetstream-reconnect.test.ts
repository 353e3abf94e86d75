/**
 * The JetStream transport's own connection after its server was killed and
 * came back at once: it reconnects on the backoff's next step (about
 * 1.6 s), not after the backoff has run up to its cap while the client only
 * waited to dial again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NatsCluster, natsNodeSkipReason } from '../support/nats-node.js';

describe.skipIf(Boolean(natsNodeSkipReason()))('JetStream transport: reconnecting to a server that was killed', () => {
  let node: NatsCluster;
  let transport: JetStreamTransport;

  beforeAll(async () => {
    node = await NatsCluster.start();
    transport = new JetStreamTransport({ servers: node.url(), prefix: `reconnect-${process.pid}` });
  }, 30_000);

  afterAll(async () => {
    await transport?.close();
    await node?.stop();
  }, 30_000);

  it('is connected again within 5 s of the server coming back, twice in a row', async () => {
    const { nc, jsm } = await transport.ready();
    const message = (id: string) => ({ id, body: new Uint8Array([1]), headers: {} });
    await transport.send('q', message('before'));
    for (const round of [1, 2]) {
      const reconnected = (async () => {
        for await (const status of nc.status()) if (status.type === 'reconnect') return Date.now();
        return Number.NaN;
      })();
      await node.kill(1);
      // Down a while, as a real restart would be: the client's first attempts fail.
      await sleep(3_000);
      await node.boot(1);
      const backAt = Date.now();
      const waitedMs = await Promise.race([reconnected.then((at) => at - backAt), sleep(30_000).then(() => Number.POSITIVE_INFINITY)]);
      expect(waitedMs, `round ${round}`).toBeLessThan(5_000);
      await transport.send('q', message(`after-${round}`));
    }
    expect((await jsm.streams.info(transport.names.of('q').stream)).state.messages).toBe(3);
  }, 90_000);
});
