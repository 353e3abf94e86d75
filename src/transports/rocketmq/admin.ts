/**
 * Topic administration over RocketMQ's remoting protocol (./remoting.ts),
 * so that the transport creates and checks its topics itself, with no
 * admin tool installed: the brokers of a cluster come from the name server,
 * topics are created on each master with `message.type=MIXED` (normal,
 * delayed and FIFO messages on one topic), and a topic counts as there once
 * the name server routes it.
 *
 * An error queue is a topic like any other; the transport marks the ones
 * it creates with `topicFilterType=MULTI_TAG`, a value the broker stores and
 * reports but no longer acts on, so that an operator's tools can tell error
 * queues from work queues. The broker's own dead-letter topics
 * (`%DLQ%<group>`) are error queues too.
 */
import { parseServerJson, REPLY, REQUEST, request, type RemotingReply } from './remoting.js';
import { TopicTypeError } from './errors.js';

/** What a topic is to redeliver. */
export type TopicKind = 'work' | 'error';

/** The broker's dead-letter topics start with this. */
export const DLQ_PREFIX = '%DLQ%';
/** The broker's retry topics start with this. */
export const RETRY_PREFIX = '%RETRY%';

/** RocketMQ's default `timerPrecisionMs`: a broker's timer fires once a second. */
export const DEFAULT_TIMER_PRECISION_MS = 1_000;

/** The message types a topic must allow for redeliver's delayed copies. */
const DELAY_CAPABLE = new Set(['MIXED', 'DELAY']);

/** A topic's configuration as a broker reports it. */
export interface TopicConfig {
  readonly topicName: string;
  readonly readQueueNums: number;
  readonly writeQueueNums: number;
  readonly topicFilterType?: string;
  readonly attributes?: Readonly<Record<string, string>>;
}

interface ClusterInfo {
  readonly brokerAddrTable: Record<string, { brokerAddrs: Record<string, string>; cluster: string }>;
  readonly clusterAddrTable: Record<string, string[]>;
}

interface RouteData {
  readonly brokerDatas: { brokerName: string; brokerAddrs: Record<string, string> }[];
  readonly queueDatas: { brokerName: string; readQueueNums: number; writeQueueNums: number }[];
}

/** A failed admin request: what the server answered. */
export class AdminError extends Error {
  override readonly name = 'AdminError';
  constructor(
    readonly operation: string,
    readonly code: number,
    remark: string | undefined,
  ) {
    super(`rocketmq: ${operation} failed (code ${code}${remark ? `: ${remark.split('\n')[0]}` : ''})`);
  }
}

/** Creates, checks and deletes topics and consumer groups of one cluster. */
export class RocketMqAdmin {
  constructor(
    readonly nameServer: string,
    readonly cluster: string,
    readonly queues: number,
    readonly timeoutMs: number,
  ) {}

  /** The addresses of the cluster's master brokers. */
  async masters(): Promise<string[]> {
    const reply = ok(await request(this.nameServer, REQUEST.getBrokerClusterInfo, {}, this.timeoutMs), 'read the cluster');
    const info = parseServerJson<ClusterInfo>(reply.body);
    const names = info.clusterAddrTable[this.cluster] ?? [];
    const masters = names.map((name) => info.brokerAddrTable[name]?.brokerAddrs['0']).filter((a): a is string => typeof a === 'string');
    if (masters.length === 0) throw new AdminError(`find the master brokers of cluster ${this.cluster}`, -1, 'the name server knows none');
    return masters;
  }

  /**
   * The coarsest timer precision (`timerPrecisionMs`) among the cluster's
   * masters: their timers fire on ticks this long, so a timed message
   * arrives up to this late. A broker that does not report it counts as
   * {@link DEFAULT_TIMER_PRECISION_MS}.
   */
  async timerPrecisionMs(): Promise<number> {
    let coarsest = 0;
    for (const broker of await this.masters()) {
      const reply = ok(await request(broker, REQUEST.getBrokerConfig, {}, this.timeoutMs), `read the configuration of broker ${broker}`);
      const match = /^timerPrecisionMs=(\d+)$/m.exec(reply.body.toString('utf8'));
      coarsest = Math.max(coarsest, match ? Number(match[1]) : DEFAULT_TIMER_PRECISION_MS);
    }
    return coarsest;
  }

  /** The masters the name server routes `topic` to, or undefined when it routes it nowhere. */
  async route(topic: string): Promise<string[] | undefined> {
    const reply = await request(this.nameServer, REQUEST.getRouteInfoByTopic, { topic }, this.timeoutMs);
    if (reply.code === REPLY.topicNotExist) return undefined;
    const route = parseServerJson<RouteData>(ok(reply, `read the route of ${topic}`).body);
    const withQueues = new Set(route.queueDatas.map((q) => q.brokerName));
    return route.brokerDatas.filter((b) => withQueues.has(b.brokerName)).map((b) => b.brokerAddrs['0']).filter((a): a is string => typeof a === 'string');
  }

  /** The topic's configuration on `broker`, or undefined when the broker has no such topic. */
  async config(broker: string, topic: string): Promise<TopicConfig | undefined> {
    const reply = await request(broker, REQUEST.getTopicConfig, { topic }, this.timeoutMs);
    if (reply.code === REPLY.topicNotExist) return undefined;
    return parseServerJson<TopicConfig>(ok(reply, `read the configuration of ${topic}`).body);
  }

  /** What `topic` is: `work`, `error`, or undefined when the name server routes it nowhere. Never creates anything. */
  async kind(topic: string): Promise<TopicKind | undefined> {
    if (topic.startsWith(DLQ_PREFIX)) return (await this.route(topic)) === undefined ? undefined : 'error';
    const brokers = await this.route(topic);
    if (brokers === undefined || brokers.length === 0) return undefined;
    const config = await this.config(brokers[0]!, topic);
    if (config === undefined) return undefined;
    return config.topicFilterType === 'MULTI_TAG' ? 'error' : 'work';
  }

  /**
   * Makes `topic` on every master of the cluster, of type MIXED, unless the
   * name server routes it already; then waits until it does. An existing
   * topic whose type allows no delayed messages (NORMAL, FIFO,
   * TRANSACTION) is refused with a {@link TopicTypeError}.
   */
  async ensure(topic: string, kind: TopicKind): Promise<void> {
    const routed = await this.route(topic);
    if (routed !== undefined && routed.length > 0) {
      const config = await this.config(routed[0]!, topic);
      const type = config?.attributes?.['message.type'];
      if (type !== undefined && !DELAY_CAPABLE.has(type)) throw new TopicTypeError(topic, type);
      return;
    }
    for (const broker of await this.masters()) {
      const fields: Record<string, string> = {
        topic,
        defaultTopic: 'TBW102',
        readQueueNums: String(this.queues),
        writeQueueNums: String(this.queues),
        perm: '6',
        topicFilterType: kind === 'error' ? 'MULTI_TAG' : 'SINGLE_TAG',
        topicSysFlag: '0',
        order: 'false',
        attributes: '+message.type=MIXED',
      };
      ok(await request(broker, REQUEST.updateAndCreateTopic, fields, this.timeoutMs), `create topic ${topic}`);
    }
    for (let waited = 0; ; waited += 50) {
      const now = await this.route(topic);
      if (now !== undefined && now.length > 0) return;
      if (waited >= this.timeoutMs) throw new AdminError(`create topic ${topic}`, -1, 'the name server does not route it yet');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Deletes `topic` from every master and from the name server; resolves
   * whether the name server routed it. Every master is asked, routed or
   * not: a broker that recovers its commit log after an unclean stop
   * rebuilds the queues of topics deleted before it, and only a delete on
   * the broker removes those.
   */
  async deleteTopic(topic: string): Promise<boolean> {
    const routed = (await this.route(topic)) ?? [];
    for (const broker of new Set([...routed, ...(await this.masters())])) ok(await request(broker, REQUEST.deleteTopicInBroker, { topic }, this.timeoutMs), `delete topic ${topic}`);
    ok(await request(this.nameServer, REQUEST.deleteTopicInNamesrv, { topic }, this.timeoutMs), `delete topic ${topic} from the name server`);
    return routed.length > 0;
  }

  /**
   * Points consumer group `group` at the first message of every queue of
   * `topic` where it has no offset yet, and leaves the others alone;
   * resolves how many queues it pointed. A group's first receive otherwise
   * starts where the broker chooses: at a queue's last message once the
   * broker no longer counts its first one as fresh (after a restart, say),
   * skipping what was sent before the group first received. The group is
   * made (with the broker's defaults) when the broker makes groups on
   * demand; one it cannot find is refused.
   */
  async startAtFirstMessage(topic: string, group: string): Promise<number> {
    let pointed = 0;
    for (const broker of (await this.route(topic)) ?? []) {
      const config = await this.config(broker, topic);
      let groupFound = false;
      for (let queueId = 0; queueId < (config?.readQueueNums ?? 0); queueId++) {
        const queue = { topic, queueId: String(queueId) };
        // Without setZeroIfNotFound=false the broker answers 0 for a group without an offset while the queue's first message looks fresh to it.
        const consumed = await request(broker, REQUEST.queryConsumerOffset, { consumerGroup: group, ...queue, setZeroIfNotFound: 'false' }, this.timeoutMs);
        if (consumed.code !== REPLY.queryNotFound) {
          ok(consumed, `read the offset of consumer group ${group} on ${topic}`);
          continue;
        }
        if (!groupFound) ok(await request(broker, REQUEST.getSubscriptionGroupConfig, { group }, this.timeoutMs), `find consumer group ${group}`);
        groupFound = true;
        const first = ok(await request(broker, REQUEST.getMinOffset, queue, this.timeoutMs), `read the first offset of ${topic}`).extFields['offset'] ?? '0';
        ok(await request(broker, REQUEST.updateConsumerOffset, { consumerGroup: group, ...queue, commitOffset: first }, this.timeoutMs), `point consumer group ${group} at the first message of ${topic}`);
        pointed++;
      }
    }
    return pointed;
  }

  /** Deletes consumer group `group` (and its offsets) from every master. */
  async deleteGroup(group: string): Promise<void> {
    for (const broker of await this.masters()) {
      const reply = await request(broker, REQUEST.deleteSubscriptionGroup, { groupName: group, cleanOffset: 'true' }, this.timeoutMs);
      if (reply.code !== REPLY.subscriptionGroupNotExist) ok(reply, `delete consumer group ${group}`);
    }
  }

  /**
   * Timed messages waiting in the brokers' timers, per topic, summed over
   * the cluster's masters (`GET_TIMER_METRICS`): counted when a timed
   * message enters a timer and again when it comes due, whoever sent it.
   */
  async timedCounts(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const broker of await this.masters()) {
      const reply = ok(await request(broker, REQUEST.getTimerMetrics, {}, this.timeoutMs), `read the timer of broker ${broker}`);
      const metrics = parseServerJson<{ timingCount?: Record<string, { count?: number }> }>(reply.body);
      for (const [topic, { count }] of Object.entries(metrics.timingCount ?? {})) {
        if (typeof count === 'number' && count > 0) out.set(topic, (out.get(topic) ?? 0) + count);
      }
    }
    return out;
  }

  /** Per queue of `topic` on each broker (its address): the next offset written and the group's consumed offset (0 when it has none). */
  async offsets(topic: string, group: string): Promise<{ broker: string; max: number; consumed: number }[]> {
    const out: { broker: string; max: number; consumed: number }[] = [];
    const routed = await this.route(topic);
    for (const broker of routed ?? []) {
      const config = await this.config(broker, topic);
      for (let queueId = 0; queueId < (config?.readQueueNums ?? 0); queueId++) {
        const max = ok(await request(broker, REQUEST.getMaxOffset, { topic, queueId: String(queueId) }, this.timeoutMs), `read the offsets of ${topic}`);
        const consumed = await request(broker, REQUEST.queryConsumerOffset, { consumerGroup: group, topic, queueId: String(queueId) }, this.timeoutMs);
        out.push({ broker, max: Number(max.extFields['offset'] ?? 0), consumed: consumed.code === REPLY.success ? Number(consumed.extFields['offset'] ?? 0) : 0 });
      }
    }
    return out;
  }
}

function ok(reply: RemotingReply, operation: string): RemotingReply {
  if (reply.code !== REPLY.success) throw new AdminError(operation, reply.code, reply.remark);
  return reply;
}
