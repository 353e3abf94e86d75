/**
 * Apache RocketMQ 5 in `npm run bench -- latency`: a RocketMqTransport with
 * a consumer group of the run's own, and the bare `rocketmq-client-nodejs`
 * beside it (a `Producer`; `SimpleConsumer` loops, `ceil(P / 32)` of them,
 * each `receive(32)` with the transport's long-poll wait, then `ack` of
 * each message without waiting for it before the next receive).
 */
import { Producer, SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import { RocketMqAdmin, RocketMqTransport } from '../../src/transports/rocketmq/index.js';
import { ROCKETMQ_DEFAULTS } from '../../src/transports/rocketmq/options.js';
import { readStamp, type BrokerCase, type CaseSettings, type Rig } from './rig.js';

const RECEIVE_BATCH = 32;
const INVISIBLE_MS = 30_000;

/** The client's log lines: errors only, to stderr. */
const quietLogger = {
  info: () => undefined,
  debug: () => undefined,
  trace: () => undefined,
  warn: () => undefined,
  error: (...args: unknown[]) => console.error('rocketmq-client:', ...args),
};

export function rocketmqCase(settings: CaseSettings, endpoints: string, nameServer: string): BrokerCase {
  const admin = new RocketMqAdmin(nameServer, 'DefaultCluster', 4, 10_000);
  const topics = { bare: `bench-latency-${settings.token}-bare`, endpoint: `bench-latency-${settings.token}-rdl`, transport: `bench-latency-${settings.token}-trn` };
  const groups = { bare: `bench-latency-${settings.token}-bare`, endpoint: `bench-latency-${settings.token}-rdl`, transport: `bench-latency-${settings.token}-trn` };
  const client = { endpoints, namespace: '', logger: quietLogger as never, requestTimeout: 10_000 };
  return {
    name: 'rocketmq',
    bareName: 'SimpleConsumer receive + ack',
    bare: async (onHandled): Promise<Rig> => {
      await admin.ensure(topics.bare, 'work');
      const producer = new Producer({ ...client, topic: topics.bare, maxAttempts: 1 });
      await producer.startup();
      const consumer = new SimpleConsumer({ ...client, consumerGroup: groups.bare, subscriptions: new Map([[topics.bare, '*']]), awaitDuration: ROCKETMQ_DEFAULTS.pollWaitMs });
      await consumer.startup();
      let stopped = false;
      let failure: unknown;
      const loop = async () => {
        while (!stopped) {
          const messages: MessageView[] = await consumer.receive(RECEIVE_BATCH, INVISIBLE_MS).catch((error: unknown) => {
            if (!stopped) failure ??= error;
            return [];
          });
          for (const message of messages) {
            onHandled(readStamp(message.body), performance.now());
            consumer.ack(message).catch((error: unknown) => (failure ??= error));
          }
        }
      };
      const loops = Promise.all(Array.from({ length: Math.ceil(settings.prefetch / RECEIVE_BATCH) }, loop));
      return {
        send: async (body) => {
          if (failure !== undefined) throw failure;
          await producer.send({ topic: topics.bare, body });
        },
        close: async () => {
          stopped = true;
          await loops;
          await consumer.shutdown();
          await producer.shutdown();
        },
      };
    },
    transport: (side) => ({
      transport: new RocketMqTransport({ endpoints, nameServer, consumerGroup: groups[side], connectionName: 'redeliver-bench-latency' }),
      queue: topics[side],
    }),
    cleanup: async () => {
      for (const topic of Object.values(topics)) await admin.deleteTopic(topic).catch(() => undefined);
      for (const group of Object.values(groups)) {
        await admin.deleteTopic(`%RETRY%${group}`).catch(() => undefined);
        await admin.deleteGroup(group).catch(() => undefined);
      }
    },
  };
}
