/**
 * How a stream entry becomes a delivery's message id: from field `i` only
 * when the entry is well formed and `i` is not empty, otherwise its stream
 * id; never an empty id.
 */
import { describe, expect, it } from 'vitest';
import { decodeDelivered, decodeEntry, MalformedEntryError } from '../../src/transports/redis/codec.js';

describe('the message id of a delivered stream entry', () => {
  it('comes from field i when the entry is well formed', () => {
    const { entry, problem } = decodeDelivered(['1-0', ['i', 'm-1', 'h', '{"a":"b"}', 'b', 'x']]);
    expect(entry.id).toBe('m-1');
    expect(entry.headers).toEqual({ a: 'b' });
    expect(problem).toBeUndefined();
  });

  it('is the stream id when the headers are not JSON, even with an i field', () => {
    const { entry, problem } = decodeDelivered(['2-0', ['i', 'm-2', 'h', 'not json', 'b', 'x']]);
    expect(entry.id).toBe('2-0');
    expect(entry.headers).toEqual({});
    expect(problem).toMatch(/not JSON/);
  });

  it('is the stream id, never empty, when field i is empty', () => {
    const { entry, problem } = decodeDelivered(['3-0', ['i', '', 'h', '{}', 'b', 'x']]);
    expect(entry.id).toBe('3-0');
    expect(problem).toMatch(/empty message id/);
    expect(() => decodeEntry(['3-0', ['i', '', 'h', '{}']])).toThrow(MalformedEntryError);
  });
});
