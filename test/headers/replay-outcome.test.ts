import { describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { decodeReplayOutcome, encodeReplayOutcome, REPLAY_OUTCOME_LIMITS, ReplayOutcomeError, type ReplayOutcome } from '../../src/operations/replay-outcome.js';

const outcome: ReplayOutcome = { kind: 'handled', messageId: 'order-7', replayCount: 2, queue: 'orders', endpoint: 'orders-worker', at: '2026-01-01T00:00:00.000Z' };
const bytes = (text: string) => new TextEncoder().encode(text);

/** A received record whose body is `body`, with the id and header a real record would carry. */
function received(body: unknown, id = 'order-7:handled:2', headers: Record<string, string> = { [HEADER.outcome]: 'handled' }) {
  return { id, body: typeof body === 'string' ? bytes(body) : bytes(JSON.stringify(body)), headers };
}

describe('encodeReplayOutcome', () => {
  it('gives a JSON body, the id message:handled:count and the outcome header', () => {
    const message = encodeReplayOutcome(outcome);
    expect(message.id).toBe('order-7:handled:2');
    expect(message.headers).toEqual({ 'redeliver-outcome': 'handled' });
    expect(JSON.parse(new TextDecoder().decode(message.body))).toEqual(outcome);
    expect(decodeReplayOutcome(message)).toEqual(outcome);
  });

  it('refuses a record it could not decode again', () => {
    expect(() => encodeReplayOutcome({ ...outcome, replayCount: 0 })).toThrow(ReplayOutcomeError);
    expect(() => encodeReplayOutcome({ ...outcome, messageId: '' })).toThrow(/messageId must be a string/);
  });
});

describe('decodeReplayOutcome', () => {
  it('reads a record and ignores fields it does not know', () => {
    expect(decodeReplayOutcome(received({ ...outcome, extra: [1, 2] }))).toEqual(outcome);
  });

  it.each([
    ['no outcome header', received(outcome, undefined, {}), /has no redeliver-outcome header/],
    ['a header that disagrees', received(outcome, undefined, { [HEADER.outcome]: 'failed' }), /header says "failed"/],
    ['an id that does not match', received(outcome, 'order-7'), /its id should be "order-7:handled:2"/],
    ['a body that is not JSON', received('{"kind": "handled",'), /not JSON/],
    ['a body that is not UTF-8', { ...received(outcome), body: new Uint8Array([0x7b, 0xff, 0x7d]) }, /not UTF-8/],
    ['a JSON array', received([outcome]), /not a JSON object/],
    ['JSON null', received('null'), /not a JSON object/],
    ['an unknown kind', received({ ...outcome, kind: 'failed' }), /kind must be "handled", got "failed"/],
    ['a missing messageId', received({ ...outcome, messageId: undefined }), /messageId must be a string/],
    ['a numeric messageId', received({ ...outcome, messageId: 7 }), /messageId must be a string .* got 7/],
    ['a replay count as a string', received({ ...outcome, replayCount: '2' }), /replayCount must be a whole number/],
    ['a fractional replay count', received({ ...outcome, replayCount: 1.5 }), /replayCount must be a whole number/],
    ['a replay count of 0', received({ ...outcome, replayCount: 0 }), /replayCount must be a whole number of at least 1/],
    ['an empty queue', received({ ...outcome, queue: '' }), /queue must be a string/],
    ['an endpoint object', received({ ...outcome, endpoint: { name: 'x' } }), /endpoint must be a string .* got object/],
    ['a time that is not ISO', received({ ...outcome, at: 'yesterday' }), /at must be an ISO 8601 time/],
    ['an impossible time', received({ ...outcome, at: '2026-13-45T99:00:00Z' }), /at must be an ISO 8601 time/],
    ['a name over the bound', received({ ...outcome, queue: 'q'.repeat(REPLAY_OUTCOME_LIMITS.nameChars + 1) }), /queue must be a string of 1 to 1024 characters/],
    ['a body over the bound', received({ ...outcome, pad: 'x'.repeat(REPLAY_OUTCOME_LIMITS.bodyBytes) }), /body has \d+ bytes, more than 8192/],
    ['a body that is not bytes', { ...received(outcome), body: 'text' as unknown as Uint8Array }, /body is not bytes/],
  ])('rejects %s', (_what, message, error) => {
    expect(() => decodeReplayOutcome(message)).toThrow(ReplayOutcomeError);
    expect(() => decodeReplayOutcome(message)).toThrow(error);
  });

  it('rejects something that is not a message', () => {
    expect(() => decodeReplayOutcome(null as never)).toThrow(/must have a string id/);
  });
});
