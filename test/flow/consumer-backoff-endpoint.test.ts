/**
 * Consumer backoff driven by a real endpoint on the memory transport: the
 * counter sees each outcome in the order the messages ran, and no message
 * is handed out while the consumer backs off.
 */
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';

/** Runs messages whose first attempt fails ('F') or succeeds ('S'), one at a time, and records the backoffs and when each handler ran. */
async function run(outcomes: string[], handlerKind: 'sync' | 'async', resume?: 'on-success' | 'at-zero') {
  const clock = new FakeClock(0);
  const transport = new MemoryTransport({ clock });
  let seq = 0;
  const backoffs: { seq: number; at: number; durationMs: number }[] = [];
  const ran: { seq: number; id: string; at: number }[] = [];
  const endpoint = new Endpoint<{ i: number }>({
    name: 'cb',
    transport,
    clock,
    concurrency: 1,
    flowControl: { consumerBackoff: resume ? { resume } : true },
    recoverability: { immediateRetries: 0, delayedRetries: 1, delayedBackoff: () => 3_600_000 },
    handler:
      handlerKind === 'sync'
        ? (m, ctx) => {
            ran.push({ seq: seq++, id: ctx.messageId, at: clock.now() });
            if (outcomes[m.i] === 'F') throw new Error('down');
          }
        : async (m, ctx) => {
            ran.push({ seq: seq++, id: ctx.messageId, at: clock.now() });
            await Promise.resolve();
            if (outcomes[m.i] === 'F') throw new Error('down');
          },
  });
  endpoint.on('consumerBackoffStarted', (e) => backoffs.push({ seq: seq++, at: clock.now(), durationMs: e.durationMs }));
  for (let i = 0; i < outcomes.length; i++) await sendJson(transport, 'cb', `m${i}`, { i });
  await endpoint.start();
  await clock.runUntil(() => ran.length >= outcomes.length, 60_000);
  await clock.advance(0);
  await endpoint.stop({ timeoutMs: 0 });
  await transport.close();
  return { backoffs, ran };
}

describe('consumer backoff on an endpoint with concurrency 1', () => {
  it.each(['sync', 'async'] as const)('outcomes F F S F back off 2 s, 4 s, 4 s (%s handler)', async (kind) => {
    const { backoffs } = await run(['F', 'F', 'S', 'F'], kind);
    expect(backoffs.map((b) => b.durationMs)).toEqual([2_000, 4_000, 4_000]);
  });

  it.each(['sync', 'async'] as const)('hands out no message while backing off (%s handler)', async (kind) => {
    const { backoffs, ran } = await run(['F', 'F', 'S', 'F'], kind);
    for (const b of backoffs) {
      const next = ran.find((r) => r.seq > b.seq);
      if (next) expect(next.at).toBeGreaterThanOrEqual(b.at + b.durationMs);
    }
    expect(ran.map((r) => r.at)).toEqual([0, 2_000, 6_000, 6_000]);
  });
});

describe('when the consumer returns to full speed', () => {
  it("on-success (NsqSharp, the default): after the first successful probe", async () => {
    const { backoffs, ran } = await run(['F', 'F', 'F', 'S', 'S', 'S'], 'async', 'on-success');
    expect(backoffs.map((b) => b.durationMs)).toEqual([2_000, 4_000, 8_000]);
    expect(ran.map((r) => r.at)).toEqual([0, 2_000, 6_000, 14_000, 14_000, 14_000]);
  });

  it('at-zero (go-nsq): backs off again after each successful probe until the counter is 0', async () => {
    const { backoffs, ran } = await run(['F', 'F', 'F', 'S', 'S', 'S'], 'async', 'at-zero');
    expect(backoffs.map((b) => b.durationMs)).toEqual([2_000, 4_000, 8_000, 4_000, 2_000]);
    expect(ran.map((r) => r.at)).toEqual([0, 2_000, 6_000, 14_000, 18_000, 20_000]);
  });
});
