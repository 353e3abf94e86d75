/**
 * Reads a topic without consuming it: `PULL_MESSAGE` over the remoting
 * protocol from each queue's first offset to its last, with a consumer
 * group of the operator's own that never commits an offset, so a read
 * changes nothing and hides nothing. The messages come in the broker's
 * stored format, decoded here (`MessageDecoder`'s layout).
 */
import { inflateSync } from 'node:zlib';
import { REPLY, REQUEST, request } from './remoting.js';
import { AdminError, type RocketMqAdmin } from './admin.js';

/** A stored message as the broker keeps it. */
export interface StoredMessage {
  /** `<broker>:<queueId>:<queueOffset>`: where it is stored, stable while it stays. */
  readonly key: string;
  readonly storedAt: number;
  /** The broker that stores it, and where in its commit log: the order it was stored in. */
  readonly broker: string;
  readonly commitLogOffset: bigint;
  readonly body: Buffer;
  /** Its properties, the broker's own (`UNIQ_KEY`, `TIMER_*` …) with the user's. */
  readonly properties: Map<string, string>;
}

const MAGIC_V2 = -626843477;
const COMPRESSED = 0x1;
const BORN_HOST_V6 = 0x10;
const STORE_HOST_V6 = 0x20;
const PULL_BATCH = 32;

/** Decodes the messages of a pull reply's body; `broker` names the broker they came from. */
export function decodeStored(broker: string, body: Buffer): StoredMessage[] {
  const out: StoredMessage[] = [];
  for (let p = 0; p + 4 <= body.length; ) {
    const total = body.readInt32BE(p);
    const magic = body.readInt32BE(p + 4);
    const queueId = body.readInt32BE(p + 12);
    const queueOffset = body.readBigInt64BE(p + 20);
    const commitLogOffset = body.readBigInt64BE(p + 28);
    const sysFlag = body.readInt32BE(p + 36);
    let q = p + 48 + (sysFlag & BORN_HOST_V6 ? 20 : 8);
    const storedAt = Number(body.readBigInt64BE(q));
    q += 8 + (sysFlag & STORE_HOST_V6 ? 20 : 8) + 4 + 8;
    const bodyLength = body.readInt32BE(q);
    q += 4;
    let payload = body.subarray(q, q + bodyLength);
    if (sysFlag & COMPRESSED) payload = inflateSync(payload);
    q += bodyLength;
    const topicLength = magic === MAGIC_V2 ? body.readInt16BE(q) : body.readInt8(q);
    q += (magic === MAGIC_V2 ? 2 : 1) + topicLength;
    const propertiesLength = body.readInt16BE(q);
    const properties = parseProperties(body.subarray(q + 2, q + 2 + propertiesLength).toString('utf8'));
    out.push({ key: `${broker}:${queueId}:${queueOffset}`, storedAt, broker, commitLogOffset, body: Buffer.from(payload), properties });
    p += total;
  }
  return out;
}

/** The broker's property string: `name\u0001value\u0002…`. */
export function parseProperties(text: string): Map<string, string> {
  const properties = new Map<string, string>();
  for (const pair of text.split('\u0002')) {
    const at = pair.indexOf('\u0001');
    if (at > 0) properties.set(pair.slice(0, at), pair.slice(at + 1));
  }
  return properties;
}

/** Reads whole topics through a consumer group that only reads. */
export class TopicReader {
  #groupReady: Promise<void> | undefined;

  constructor(
    readonly admin: RocketMqAdmin,
    /** The group pulls go under: created when missing, never given an offset. */
    readonly group: string,
  ) {}

  /** Every message `topic` holds, oldest stored first. */
  async readAll(topic: string): Promise<StoredMessage[]> {
    const brokers = await this.admin.route(topic);
    if (brokers === undefined) return [];
    await this.#ensureGroup(brokers);
    const all: StoredMessage[] = [];
    for (const broker of brokers) {
      const config = await this.admin.config(broker, topic);
      for (let queueId = 0; queueId < (config?.readQueueNums ?? 0); queueId++) all.push(...(await this.#readQueue(broker, topic, queueId)));
    }
    // On one broker the commit log holds messages in the order they were stored; across brokers, their store times.
    return all.sort((a, b) => (a.broker === b.broker ? (a.commitLogOffset < b.commitLogOffset ? -1 : 1) : a.storedAt - b.storedAt));
  }

  async #readQueue(broker: string, topic: string, queueId: number): Promise<StoredMessage[]> {
    const out: StoredMessage[] = [];
    let offset = 0;
    for (;;) {
      const reply = await request(
        broker,
        REQUEST.pullMessage,
        {
          consumerGroup: this.group,
          topic,
          queueId: String(queueId),
          queueOffset: String(offset),
          maxMsgNums: String(PULL_BATCH),
          // The subscription travels with the request (FLAG_SUBSCRIPTION); no offset is committed.
          sysFlag: '4',
          commitOffset: '0',
          suspendTimeoutMillis: '0',
          subscription: '*',
          subVersion: '0',
          expressionType: 'TAG',
        },
        this.admin.timeoutMs,
      );
      const next = Number(reply.extFields['nextBeginOffset']);
      if (reply.code === REPLY.success) {
        const messages = decodeStored(broker, reply.body);
        out.push(...messages);
        if (!(next > offset) || messages.length === 0) return out;
        offset = next;
      } else if ((reply.code === REPLY.pullOffsetMoved || reply.code === REPLY.pullRetryImmediately) && next > offset) {
        offset = next;
      } else if (reply.code === REPLY.pullNotFound || reply.code === REPLY.pullOffsetMoved || reply.code === REPLY.pullRetryImmediately) {
        return out;
      } else {
        throw new AdminError(`read ${topic}`, reply.code, reply.remark);
      }
    }
  }

  #ensureGroup(brokers: readonly string[]): Promise<void> {
    this.#groupReady ??= (async () => {
      const body = Buffer.from(JSON.stringify({ groupName: this.group, consumeEnable: true, consumeFromMinEnable: true, consumeBroadcastEnable: false, retryQueueNums: 1, retryMaxTimes: 16, brokerId: 0, whichBrokerWhenConsumeSlowly: 1 }));
      for (const broker of brokers) {
        const reply = await request(broker, REQUEST.updateAndCreateSubscriptionGroup, {}, this.admin.timeoutMs, body);
        if (reply.code !== REPLY.success) throw new AdminError(`create consumer group ${this.group}`, reply.code, reply.remark);
      }
    })();
    this.#groupReady.catch(() => {
      this.#groupReady = undefined;
    });
    return this.#groupReady;
  }
}
