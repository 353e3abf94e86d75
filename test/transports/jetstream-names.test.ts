/** Queue names as subject tokens, reply subjects, and headers on the wire: pure functions, no server. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { parseAckSubject } from '../../src/transports/jetstream/ack-subject.js';
import { decodeNatsHeaders, encodeNatsHeaders, ESCAPED_HEADER, ID_HEADER } from '../../src/transports/jetstream/codec.js';
import { decodeQueueName, encodeQueueName, JetStreamNames } from '../../src/transports/jetstream/names.js';

describe('jetstream names', () => {
  it('encodes any queue name into a token of safe characters and back', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, unit: 'grapheme' }), (queue) => {
        const token = encodeQueueName(queue);
        expect(token).toMatch(/^[A-Za-z0-9_~-]+$/);
        expect(decodeQueueName(token)).toBe(queue);
      }),
    );
    expect(encodeQueueName('orders.created')).toBe('orders~2Ecreated');
    expect(encodeQueueName('plain_name-1')).toBe('plain_name-1');
  });

  it('reads back only tokens it makes, and queues only from its own prefix', () => {
    expect(decodeQueueName('a~2e')).toBeUndefined();
    expect(decodeQueueName('a b')).toBeUndefined();
    const names = new JetStreamNames('app');
    const q = names.of('orders.created *');
    expect(q.stream).toBe('app_Q_orders~2Ecreated~20~2A');
    expect(q.subject).toBe('app.q.orders~2Ecreated~20~2A');
    expect(q.delaySubject).toBe('app.d.orders~2Ecreated~20~2A');
    expect(names.queueOfSubject(q.subject)).toBe('orders.created *');
    expect(names.queueOfSubject('other.q.orders')).toBeUndefined();
  });

  it('refuses a prefix that could be mistaken for another and a queue name too long for a stream', () => {
    expect(() => new JetStreamNames('a_b')).toThrow(RangeError);
    expect(() => new JetStreamNames('a.b')).toThrow(RangeError);
    expect(() => new JetStreamNames('')).toThrow(RangeError);
    expect(() => new JetStreamNames('ok').of('x'.repeat(300))).toThrow(/too long/);
  });
});

describe('jetstream reply subjects', () => {
  it('reads the stream, count, sequence and stored time of both subject layouts', () => {
    const old = parseAckSubject('$JS.ACK.S_Q_x.redeliver.3.42.40.1795453702872197039.7');
    expect(old).toEqual({ stream: 'S_Q_x', consumer: 'redeliver', delivered: 3, streamSeq: 42, storedAtMs: 1795453702872 });
    const withDomain = parseAckSubject('$JS.ACK.hub.ACCHASH.S_Q_x.redeliver.1.5.5.1795453702872197039.0.r4nd');
    expect(withDomain).toMatchObject({ stream: 'S_Q_x', delivered: 1, streamSeq: 5 });
    expect(parseAckSubject('_INBOX.abc')).toBeUndefined();
    expect(parseAckSubject('$JS.ACK.S.c.x.1.1.1.0')).toBeUndefined();
    expect(parseAckSubject(undefined)).toBeUndefined();
  });
});

describe('jetstream headers', () => {
  it('round-trips values NATS cannot carry as they are (newlines, UTF-8, outer spaces, percent signs)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), fc.string({ unit: 'grapheme' })), fc.string({ minLength: 1 }), (headers, id) => {
        const decoded = decodeNatsHeaders(encodeNatsHeaders(id, headers));
        expect(decoded.id).toBe(id);
        const expected = Object.fromEntries(Object.entries(headers).filter(([name]) => !/^nats-/.test(name) && ![ID_HEADER, ESCAPED_HEADER, 'redeliver-delay-ms'].includes(name)));
        expect(decoded.headers).toEqual(expected);
      }),
    );
    const hdrs = encodeNatsHeaders('m-1', { 'redeliver-failure-stack': 'Error: x\n    at y', plain: 'as is' });
    expect(hdrs.get('plain')).toBe('as is');
    expect(hdrs.get('redeliver-failure-stack')).not.toContain('\n');
  });

  it('refuses a header name NATS cannot carry, and keeps the server headers out of the message headers', () => {
    expect(() => encodeNatsHeaders('m', { 'bad name': 'x' })).toThrow(TypeError);
    expect(() => encodeNatsHeaders('m', { 'a:b': 'x' })).toThrow(TypeError);
    const foreign = natsHeaders();
    foreign.set('Nats-Msg-Id', 'abc');
    foreign.set('x-app', '1');
    const decoded = decodeNatsHeaders(foreign);
    expect(decoded).toEqual({ id: undefined, natsMsgId: 'abc', headers: { 'x-app': '1' }, delayMs: undefined });
  });
});
