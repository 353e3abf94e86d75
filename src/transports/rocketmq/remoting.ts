/**
 * RocketMQ's remoting protocol, the TCP protocol its name servers and
 * brokers speak to their admin tools, reduced to what the transport needs:
 * one request, one reply. A frame is a 4-byte length, a 4-byte word whose
 * high byte is the serialization (0, JSON) and whose low three bytes are the
 * header's length, the JSON header `{code, language, version, opaque, flag,
 * extFields}`, and the body. Each request opens its own connection: topics
 * are created and checked rarely, and a connection per request survives a
 * name server or broker restart without reconnection logic.
 */
import { connect, type Socket } from 'node:net';

/** The request codes the transport sends (RocketMQ's `RequestCode`). */
export const REQUEST = {
  updateAndCreateTopic: 17,
  getMaxOffset: 30,
  getMinOffset: 31,
  queryConsumerOffset: 14,
  updateConsumerOffset: 15,
  getRouteInfoByTopic: 105,
  getBrokerClusterInfo: 106,
  deleteSubscriptionGroup: 207,
  deleteTopicInBroker: 215,
  deleteTopicInNamesrv: 216,
  getTopicConfig: 351,
  getSubscriptionGroupConfig: 352,
  pullMessage: 11,
  updateAndCreateSubscriptionGroup: 200,
  getBrokerConfig: 26,
  getTimerMetrics: 61,
} as const;

/** Reply codes the transport tells apart (RocketMQ's `ResponseCode`). */
export const REPLY = { success: 0, topicNotExist: 17, pullNotFound: 19, pullRetryImmediately: 20, pullOffsetMoved: 21, queryNotFound: 22, subscriptionGroupNotExist: 26 } as const;

/** A reply: its code, remark, header fields and body. */
export interface RemotingReply {
  readonly code: number;
  readonly remark: string | undefined;
  readonly extFields: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** A request that got no reply: the server is unreachable, closed the connection, or took longer than the timeout. */
export class RemotingError extends Error {
  override readonly name = 'RemotingError';
  constructor(
    readonly address: string,
    readonly code: number,
    reason: string,
  ) {
    super(`rocketmq: request ${code} to ${address} failed: ${reason}`);
  }
}

let nextOpaque = 1;

/** Encodes one request frame. */
export function encodeRequest(code: number, extFields: Readonly<Record<string, string>>, opaque: number, body?: Uint8Array): Buffer {
  const header = Buffer.from(JSON.stringify({ code, language: 'JAVA', version: 0, opaque, flag: 0, extFields, serializeTypeCurrentRPC: 'JSON' }));
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
  const prefix = Buffer.alloc(8);
  prefix.writeInt32BE(4 + header.length + payload.length, 0);
  prefix.writeInt32BE(header.length & 0xffffff, 4);
  return Buffer.concat([prefix, header, payload]);
}

/** Decodes one whole frame, or returns undefined while `data` holds less. Throws on a header that is not JSON. */
export function decodeFrame(data: Buffer): RemotingReply | undefined {
  if (data.length < 8) return undefined;
  const length = data.readInt32BE(0);
  if (data.length < 4 + length) return undefined;
  const headerLength = data.readInt32BE(4) & 0xffffff;
  const header = JSON.parse(data.subarray(8, 8 + headerLength).toString('utf8')) as { code?: unknown; remark?: unknown; extFields?: unknown };
  const extFields: Record<string, string> = {};
  if (typeof header.extFields === 'object' && header.extFields !== null) {
    for (const [k, v] of Object.entries(header.extFields)) extFields[k] = String(v);
  }
  return {
    code: Number(header.code),
    remark: typeof header.remark === 'string' ? header.remark : undefined,
    extFields,
    body: data.subarray(8 + headerLength, 4 + length),
  };
}

/**
 * The JSON RocketMQ writes (fastjson), which may have bare integer keys
 * (`{0:"127.0.0.1:10911"}`): quoted, then parsed.
 */
export function parseServerJson<T>(body: Buffer): T {
  return JSON.parse(body.toString('utf8').replace(/([{,])(-?\d+):/g, '$1"$2":')) as T;
}

/** Sends one request to `address` (`host:port`) and resolves its reply. */
export function request(address: string, code: number, extFields: Readonly<Record<string, string>> = {}, timeoutMs = 5_000, body?: Uint8Array): Promise<RemotingReply> {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  const port = Number(address.slice(colon + 1));
  const opaque = nextOpaque++;
  return new Promise((resolve, reject) => {
    let socket: Socket | undefined;
    let data = Buffer.alloc(0);
    const fail = (reason: string) => {
      clearTimeout(timer);
      socket?.destroy();
      reject(new RemotingError(address, code, reason));
    };
    const timer = setTimeout(() => fail(`no reply within ${timeoutMs} ms`), timeoutMs);
    socket = connect({ host, port }, () => socket!.write(encodeRequest(code, extFields, opaque, body)));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      let reply: RemotingReply | undefined;
      try {
        reply = decodeFrame(data);
      } catch (error) {
        fail(`unreadable reply (${(error as Error).message})`);
        return;
      }
      if (reply === undefined) return;
      clearTimeout(timer);
      socket!.destroy();
      resolve(reply);
    });
    socket.on('error', (error) => fail(error.message));
    socket.on('close', () => fail('connection closed before the reply'));
  });
}
