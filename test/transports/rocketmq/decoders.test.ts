/** The RocketMQ transport's wire decoders, on frames and stored messages built byte by byte: the remoting protocol's frames and the broker's stored-message layout. */
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeRequest, parseServerJson } from '../../../src/transports/rocketmq/remoting.js';
import { decodeStored, parseProperties } from '../../../src/transports/rocketmq/reader.js';

const MAGIC_V1 = -626843481;
const MAGIC_V2 = -626843477;

/** One message in the broker's stored layout (`MessageDecoder`). */
function stored(o: { magic?: number; queueId?: number; queueOffset?: bigint; commitLogOffset?: bigint; storedAt?: number; body: Buffer; compressed?: boolean; v6?: boolean; topic: string; properties: string }): Buffer {
  const int = (n: number) => { const b = Buffer.alloc(4); b.writeInt32BE(n); return b; };
  const long = (n: bigint) => { const b = Buffer.alloc(8); b.writeBigInt64BE(n); return b; };
  const magic = o.magic ?? MAGIC_V2;
  const sysFlag = (o.compressed ? 0x1 : 0) | (o.v6 ? 0x10 | 0x20 : 0);
  const host = Buffer.alloc(o.v6 ? 20 : 8, 7);
  const payload = o.compressed ? deflateSync(o.body) : o.body;
  const topic = Buffer.from(o.topic);
  const topicLength = magic === MAGIC_V2 ? Buffer.alloc(2) : Buffer.alloc(1);
  if (magic === MAGIC_V2) topicLength.writeInt16BE(topic.length);
  else topicLength.writeInt8(topic.length);
  const properties = Buffer.from(o.properties);
  const propertiesLength = Buffer.alloc(2);
  propertiesLength.writeInt16BE(properties.length);
  const rest = Buffer.concat([
    int(magic), int(0), int(o.queueId ?? 0), int(0), long(o.queueOffset ?? 0n), long(o.commitLogOffset ?? 0n), int(sysFlag),
    long(1_000n), host, long(BigInt(o.storedAt ?? 0)), host, int(0), long(0n),
    int(payload.length), payload, topicLength, topic, propertiesLength, properties,
  ]);
  return Buffer.concat([int(4 + rest.length), rest]);
}

describe('rocketmq remoting frames', () => {
  it('a request encodes as length, header length, JSON header and body, and decodes back', () => {
    const frame = encodeRequest(17, { topic: 't', perm: '6' }, 42, Buffer.from('body'));
    expect(frame.readInt32BE(0)).toBe(frame.length - 4);
    const decoded = decodeFrame(frame)!;
    expect(decoded.code).toBe(17);
    expect(decoded.extFields).toEqual({ topic: 't', perm: '6' });
    expect(decoded.body.toString()).toBe('body');
    expect(JSON.parse(frame.subarray(8, 8 + frame.readInt32BE(4)).toString())).toMatchObject({ code: 17, opaque: 42, language: 'JAVA', serializeTypeCurrentRPC: 'JSON' });
  });

  it('a partial frame decodes to undefined until it is whole; the serialize type in the top byte is masked off', () => {
    const frame = encodeRequest(0, {}, 1);
    expect(decodeFrame(frame.subarray(0, 5))).toBeUndefined();
    expect(decodeFrame(frame.subarray(0, frame.length - 1))).toBeUndefined();
    const typed = Buffer.from(frame);
    typed.writeInt32BE(frame.readInt32BE(4) | 0x01_000000, 4);
    expect(decodeFrame(typed)!.code).toBe(0);
  });

  it('a reply: remark, header fields as strings, an empty body', () => {
    const header = Buffer.from(JSON.stringify({ code: 17, remark: 'No topic route info', extFields: { offset: 12 } }));
    const frame = Buffer.alloc(8 + header.length);
    frame.writeInt32BE(4 + header.length, 0);
    frame.writeInt32BE(header.length, 4);
    header.copy(frame, 8);
    expect(decodeFrame(frame)).toEqual({ code: 17, remark: 'No topic route info', extFields: { offset: '12' }, body: Buffer.alloc(0) });
  });

  it("the server's JSON with bare integer keys parses", () => {
    expect(parseServerJson<{ brokerAddrs: Record<string, string> }>(Buffer.from('{"brokerAddrs":{0:"127.0.0.1:10911",-1:"x"}}'))).toEqual({ brokerAddrs: { '0': '127.0.0.1:10911', '-1': 'x' } });
  });
});

describe('rocketmq stored messages', () => {
  it('decodes a batch: key, store time, commit-log offset, body and properties', () => {
    const a = stored({ queueId: 2, queueOffset: 7n, commitLogOffset: 1_234n, storedAt: 1_700_000_000_000, body: Buffer.from('one'), topic: 'orders', properties: 'redeliver-id\u0001m-1\u0002UNIQ_KEY\u0001AB\u0002' });
    const b = stored({ queueId: 2, queueOffset: 8n, body: Buffer.from('two'), topic: 'orders', properties: 'redeliver-id\u0001m-2\u0002' });
    const [first, second] = decodeStored('127.0.0.1:10911', Buffer.concat([a, b]));
    expect(first).toMatchObject({ key: '127.0.0.1:10911:2:7', storedAt: 1_700_000_000_000, commitLogOffset: 1_234n });
    expect(first!.body.toString()).toBe('one');
    expect([...first!.properties]).toEqual([['redeliver-id', 'm-1'], ['UNIQ_KEY', 'AB']]);
    expect(second!.key).toBe('127.0.0.1:10911:2:8');
    expect(second!.body.toString()).toBe('two');
  });

  it('inflates a compressed body, skips IPv6 hosts, and reads the one-byte topic length of the first layout', () => {
    const body = Buffer.from('x'.repeat(5_000));
    const [v6] = decodeStored('b', stored({ body, compressed: true, v6: true, topic: 't', properties: 'k\u0001v' }));
    expect(v6!.body.equals(body)).toBe(true);
    expect(v6!.properties.get('k')).toBe('v');
    const [v1] = decodeStored('b', stored({ magic: MAGIC_V1, body: Buffer.from('old'), topic: 'legacy-topic', properties: 'k\u0001w' }));
    expect(v1!.body.toString()).toBe('old');
    expect(v1!.properties.get('k')).toBe('w');
  });

  it('properties: pairs split on \\u0002 and \\u0001, a value may hold \\u0001, a pair without a name is skipped', () => {
    expect([...parseProperties('a\u00011\u0002b\u0001x\u0001y\u0002\u0001nameless\u0002')]).toEqual([['a', '1'], ['b', 'x\u0001y']]);
    expect(parseProperties('').size).toBe(0);
  });
});
