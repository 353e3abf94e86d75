/**
 * A scratch space on the shared RabbitMQ for tests that delete queues or
 * delay levels under a running transport: queue names and a topology prefix
 * of its own (deleting a shared delay level would break other tests),
 * transports named after it, a channel of its own connection, and a cleanup
 * that deletes every queue, delay level and exchange it used. Nothing
 * broker-wide is touched.
 */
import { randomUUID } from 'node:crypto';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { RabbitMqTransport, type RabbitMqOperationsOptions, type RabbitMqTransportOptions } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL } from './brokers.js';
import { deleteDelayTopology } from './delay-topology.js';

export interface RabbitScratch {
  /** The topology prefix of every transport opened here. */
  readonly prefix: string;
  /** A unique queue name with `what` in it, deleted by {@link cleanup}. */
  queueName(what: string): string;
  /** A transport on the scratch prefix, with a connection name of this scratch space; closed by {@link cleanup}. */
  open(options?: RabbitMqTransportOptions & RabbitMqOperationsOptions): RabbitMqTransport;
  /** A channel of the scratch space's own connection; an error (a 404 on a missing queue) only closes it. */
  channel(): Promise<Channel>;
  /** Closes the transports and deletes every queue, delay level and exchange used. */
  cleanup(): Promise<void>;
}

/** A scratch space labelled `label` (in queue, prefix and connection names). */
export function rabbitScratch(label: string): RabbitScratch {
  const run = randomUUID().slice(0, 8);
  const prefix = `${label}-${run}`;
  const queues = new Set<string>();
  const transports: RabbitMqTransport[] = [];
  let admin: ChannelModel | undefined;
  const channel = async (): Promise<Channel> => {
    admin ??= await amqp.connect(RABBITMQ_URL);
    admin.on('error', () => undefined);
    const ch = await admin.createChannel();
    ch.on('error', () => undefined);
    return ch;
  };
  return {
    prefix,
    queueName(what) {
      const name = `${label}-${what}-${run}-${randomUUID().slice(0, 6)}`;
      queues.add(name);
      return name;
    },
    open(options = {}) {
      const t = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-test-${label}-${run}`, topologyPrefix: prefix, ...options });
      transports.push(t);
      return t;
    },
    channel,
    async cleanup() {
      for (const t of transports.splice(0)) await t.close();
      admin ??= await amqp.connect(RABBITMQ_URL);
      admin.on('error', () => undefined);
      await deleteDelayTopology(admin, prefix, queues);
      queues.clear();
      await admin?.close().catch(() => undefined);
      admin = undefined;
    },
  };
}
