/**
 * NATS JetStream in `npm run bench -- latency`: a JetStreamTransport on a
 * prefix of the run's own, and the bare `@nats-io/jetstream` client beside
 * it (a work-queue stream as the transport lays one out, `publish` awaiting
 * its ack, a durable pull consumer read with `consume({ max_messages: P })`
 * that acks each message).
 */
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { addPullConsumer, addWorkStream, deleteStreams, openClients, withClients } from '../jetstream/server.js';
import { readStamp, type BrokerCase, type CaseSettings, type Rig } from './rig.js';

export function jetstreamCase(settings: CaseSettings, servers: string): BrokerCase {
  const barePrefix = `bench-latency-${settings.token}-bare`;
  const stream = `${barePrefix}_work`;
  const subject = `${barePrefix}.work`;
  const prefix = `bench-latency-${settings.token}-rdl`;
  return {
    name: 'jetstream',
    bareName: 'JetStream consume() + ack',
    bare: async (onHandled): Promise<Rig> => {
      const clients = await openClients(servers, 'redeliver-bench-latency-bare');
      await addWorkStream(clients.jsm, stream, subject);
      await addPullConsumer(clients.jsm, stream, 'bare', settings.prefetch);
      const consumer = await clients.js.consumers.get(stream, 'bare');
      const messages = await consumer.consume({ max_messages: settings.prefetch });
      const loop = (async () => {
        for await (const message of messages) {
          onHandled(readStamp(message.data), performance.now());
          message.ack();
        }
      })();
      return {
        send: async (body, id) => {
          await clients.js.publish(subject, body, { msgID: id });
        },
        close: async () => {
          await messages.close();
          await loop;
          await clients.nc.close();
        },
      };
    },
    transport: (side) => ({
      transport: new JetStreamTransport({ servers, prefix, maxAckPending: settings.prefetch, connectionName: 'redeliver-bench-latency' }),
      queue: `latency-${side}`,
    }),
    cleanup: () =>
      withClients(servers, 'redeliver-bench-latency-cleanup', async ({ jsm }) => {
        await deleteStreams(jsm, barePrefix);
        await deleteStreams(jsm, prefix);
      }),
  };
}
