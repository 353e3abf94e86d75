/**
 * Topics and channels on every nsqd the transport knows, through nsqd's
 * HTTP API: a queue is a topic, read through the transport's channel.
 */
import { checkName } from './names.js';
import type { NsqNodes } from './nodes.js';

export class NsqTopology {
  constructor(
    private readonly nodes: NsqNodes,
    private readonly channel: string,
  ) {}

  /** Creates `queue`'s topic with the consumer channel on every node (`nsqd`'s, and the ones nsqlookupd lists for it). */
  async createQueue(queue: string): Promise<void> {
    checkName(queue, 'topic', 'createQueue: queue');
    const nodes = await this.nodes.forTopic(queue);
    await Promise.all(nodes.map((node) => node.ensureChannel(queue, this.channel)));
  }

  /** Deletes `queue`'s topic, its channels and their messages on every node; true when some node had it. */
  async deleteQueue(queue: string): Promise<boolean> {
    checkName(queue, 'topic', 'deleteQueue: queue');
    const nodes = await this.nodes.forTopic(queue);
    const deleted = await Promise.all(
      nodes.map(async (node) => {
        node.forget(queue);
        return node.http.deleteTopic(queue);
      }),
    );
    return deleted.some(Boolean);
  }

  /** Creates `channel` on `queue`'s topic on every node. */
  async createChannel(queue: string, channel: string): Promise<void> {
    checkName(queue, 'topic', 'createChannel: queue');
    checkName(channel, 'channel', 'createChannel: channel');
    const nodes = await this.nodes.forTopic(queue);
    await Promise.all(nodes.map((node) => node.ensureChannel(queue, channel)));
  }

  /** Deletes `channel` of `queue`'s topic with its messages on every node; true when some node had it. */
  async deleteChannel(queue: string, channel: string): Promise<boolean> {
    checkName(queue, 'topic', 'deleteChannel: queue');
    checkName(channel, 'channel', 'deleteChannel: channel');
    const nodes = await this.nodes.forTopic(queue);
    const deleted = await Promise.all(
      nodes.map(async (node) => {
        node.forget(queue);
        return node.http.deleteChannel(queue, channel);
      }),
    );
    return deleted.some(Boolean);
  }
}
