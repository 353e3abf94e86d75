/**
 * Cleanup of the delay topology a broker test declared under its own
 * `topologyPrefix`: both kinds of levels, their deliver exchanges and the
 * quorum levels' unroutable queue.
 */
import type { ChannelModel } from 'amqplib';
import { delayTopologyNames, levelQueues, type DelayTopologyNames } from '../../src/transports/rabbitmq/topology.js';

/** Every queue and every exchange of the delay topology of `prefix`, both kinds. */
export function delayTopologyObjects(prefix: string): { queues: string[]; exchanges: string[] } {
  const kinds: DelayTopologyNames[] = [delayTopologyNames(prefix, 'quorum'), delayTopologyNames(prefix, 'classic')];
  const queues = kinds.flatMap((names) => [...levelQueues(names), ...(names.unroutable ? [names.unroutable] : [])]);
  const exchanges = kinds.flatMap((names) => [names.deliver, ...levelQueues(names), ...(names.unroutable ? [names.unroutable] : [])]);
  return { queues, exchanges };
}

/** Deletes `queues`, then the delay topology of `prefix`; what does not exist is skipped. */
export async function deleteDelayTopology(connection: ChannelModel, prefix: string, queues: Iterable<string> = []): Promise<void> {
  const objects = delayTopologyObjects(prefix);
  // A missing queue or exchange closes an AMQP channel: one channel per deletion.
  const each = async (fn: (channel: Awaited<ReturnType<ChannelModel['createChannel']>>) => Promise<unknown>) => {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await fn(channel).catch(() => undefined);
    await channel.close().catch(() => undefined);
  };
  for (const queue of [...queues, ...objects.queues]) await each((channel) => channel.deleteQueue(queue));
  for (const exchange of objects.exchanges) await each((channel) => channel.deleteExchange(exchange));
}
