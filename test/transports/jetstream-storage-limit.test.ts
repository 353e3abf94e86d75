/**
 * A send to an account at its JetStream storage limit ("resource limits
 * exceeded for account", on a server of the test's own whose account limit
 * is lowered to 1 byte): the send is refused as throttling, a
 * `QueueFullError` a `Producer` backs off on, not a fatal error, and goes
 * through once the limit is lifted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NatsCluster, natsNodeSkipReason } from '../support/nats-node.js';

describe.skipIf(Boolean(natsNodeSkipReason()))('JetStream transport: an account at its storage limit', () => {
  let node: NatsCluster;
  let transport: JetStreamTransport;
  const message = (id: string) => ({ id, body: new Uint8Array([1]), headers: {} });

  beforeAll(async () => {
    node = await NatsCluster.start();
    transport = new JetStreamTransport({ servers: node.url(), prefix: `limit-${process.pid}` });
  }, 30_000);

  afterAll(async () => {
    await transport?.close();
    await node?.stop();
  }, 30_000);

  it('refuses a send as throttling while the limit holds, and stores it once lifted', async () => {
    await transport.send('q', message('first'));
    await node.limitStorage(1);
    let refused: unknown;
    try {
      await transport.send('q', message('second')).catch((error: unknown) => (refused = error));
    } finally {
      await node.limitStorage(undefined);
    }
    expect((refused as Error | undefined)?.name).toBe('QueueFullError');
    expect(String((refused as Error).message)).toMatch(/resource limits exceeded/);
    expect(transport.classifySendError(refused)).toBe('throttled');
    await transport.send('q', message('second'));
    const { jsm } = await transport.ready();
    expect((await jsm.streams.info(transport.names.of('q').stream)).state.messages).toBe(2);
  }, 30_000);
});
