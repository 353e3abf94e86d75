import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { MemoryDeduplicationStore } from '../../src/dedup/memory-store.js';
import { SqliteDeduplicationStore } from '../../src/dedup/sqlite-store.js';
import type { DeduplicationStore } from '../../src/dedup/types.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';

const stores: [string, () => { store: DeduplicationStore; done: () => void }][] = [
  ['memory', () => ({ store: new MemoryDeduplicationStore(60_000), done: () => undefined })],
  [
    'sqlite',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'redeliver-dedup-'));
      const store = new SqliteDeduplicationStore({ path: join(dir, 'dedup.db'), windowMs: 60_000 });
      return { store, done: () => { store.close(); rmSync(dir, { recursive: true, force: true }); } };
    },
  ],
];

describe.each(stores)('deduplication with the %s store', (_name, make) => {
  it('handles each id once, however many copies arrive, within the window', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const { store, done } = make();
    const handled: string[] = [];
    let failOnce = true;
    const endpoint = new Endpoint<{ n: number }>({
      name: 'd',
      transport,
      clock,
      concurrency: 4,
      deduplication: store,
      recoverability: { immediateRetries: 0, delayedRetries: 1, delayedBackoff: () => 1_000 },
      handler: (_message, ctx) => {
        if (ctx.messageId === 'b' && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
        handled.push(ctx.messageId);
      },
    });
    await endpoint.start();
    for (const id of ['a', 'a', 'b', 'a', 'b', 'c']) await sendJson(transport, 'd', id, { n: 1 });
    await clock.runUntil(() => endpoint.stats.handled + endpoint.stats.duplicates >= 6 && endpoint.stats.inFlight === 0, 60_000);
    expect(handled.sort()).toEqual(['a', 'b', 'c']);
    expect(endpoint.stats.duplicates).toBe(3);
    // Outside the window the id is forgotten.
    await clock.advance(120_000);
    await sendJson(transport, 'd', 'a', { n: 2 });
    await clock.runUntil(() => handled.length === 4, 10_000);
    expect(handled.filter((id) => id === 'a')).toHaveLength(2);
    await endpoint.stop();
    done();
  });
});
