/**
 * RocketMQ broker access for tests: whether the broker runs, and
 * transports whose topics and consumer group are recorded and deleted
 * after the test file (the suite owns what it creates). Each file's consumer
 * group carries a run token.
 */
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { RocketMqAdmin } from '../../../src/transports/rocketmq/admin.js';
import { RocketMqTransport, type RocketMqTransportOptions } from '../../../src/transports/rocketmq/index.js';

export const ROCKETMQ_ENDPOINTS = process.env['ROCKETMQ_ENDPOINTS'] ?? '127.0.0.1:8081';
export const ROCKETMQ_NAMESRV = process.env['ROCKETMQ_NAMESRV'] ?? '127.0.0.1:9876';

function reachable(address: string): Promise<boolean> {
  const [host, port] = address.split(':');
  return new Promise((resolve) => {
    const socket = connect({ host: host!, port: Number(port) });
    socket.setTimeout(2_000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Why RocketMQ tests are skipped, or undefined when the proxy and name server answer (a failure under CI=true). */
export async function rocketSkipReason(): Promise<string | undefined> {
  if ((await reachable(ROCKETMQ_ENDPOINTS)) && (await reachable(ROCKETMQ_NAMESRV))) return undefined;
  const reason = `RocketMQ is not reachable at ${ROCKETMQ_ENDPOINTS} (proxy) and ${ROCKETMQ_NAMESRV} (name server)`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  return reason;
}

/** Makes transports on the test broker under one consumer group, and deletes every topic they created and the group. */
export class RocketScratch {
  readonly group: string;
  readonly topics = new Set<string>();
  readonly admin = new RocketMqAdmin(ROCKETMQ_NAMESRV, 'DefaultCluster', 1, 5_000);

  constructor(label: string) {
    this.group = `redeliver-test-${label}-${randomUUID().slice(0, 8)}`;
  }

  /** A transport whose topic creations are recorded. */
  transport(options: RocketMqTransportOptions = {}): RocketMqTransport {
    const t = new RocketMqTransport({ endpoints: ROCKETMQ_ENDPOINTS, nameServer: ROCKETMQ_NAMESRV, consumerGroup: this.group, ...options });
    const ensure = t.admin.ensure.bind(t.admin);
    t.admin.ensure = async (topic, kind) => {
      this.topics.add(topic);
      await ensure(topic, kind);
    };
    return t;
  }

  /** Deletes the recorded topics, the broker's retry topics (`%RETRY%<group>`, and `%RETRY%<group>_<topic>` of pop consumption) and dead-letter topic of the group, and the group. */
  async cleanup(): Promise<void> {
    const retries = [...this.topics].map((topic) => `%RETRY%${this.group}_${topic}`);
    for (const topic of [...this.topics, ...retries, `%RETRY%${this.group}`, `%DLQ%${this.group}`]) await this.admin.deleteTopic(topic).catch(() => undefined);
    for (const group of [this.group, `${this.group}-operator`]) await this.admin.deleteGroup(group).catch(() => undefined);
    this.topics.clear();
  }
}
