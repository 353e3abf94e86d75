import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connectionBackoff } from '../../src/backoff/connection.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { Producer } from '../../src/producer/producer.js';
import { ThrottledError } from '../../src/transport/send-errors.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';

describe('SQLite backlog throttling, end to end', () => {
  it('refuses sends past maxBacklog, the producer backs off, and every message lands once consumers drain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-throttle-'));
    const transport = new SqliteTransport({ path: join(dir, 't.db'), maxBacklog: 20 });
    try {
      const full = Array.from({ length: 20 }, (_, i) => transport.send('jobs', { id: `pre-${i}`, body: new Uint8Array([1]), headers: {} }));
      await Promise.all(full);
      await expect(transport.send('jobs', { id: 'over', body: new Uint8Array([1]), headers: {} })).rejects.toBeInstanceOf(ThrottledError);
      expect(transport.classifySendError(new ThrottledError('x'))).toBe('throttled');

      const producer = new Producer<number>({ transport, retry: { throttleBackoff: connectionBackoff({ initialMs: 100, maxMs: 400 }), timeoutMs: 30_000 } });
      const sends = Array.from({ length: 40 }, (_, i) => producer.send('jobs', i, { id: `m-${i}` }));
      await new Promise((r) => setTimeout(r, 300));
      expect(producer.stats.throttled).toBeGreaterThan(0);

      const handled = new Set<string>();
      const endpoint = new Endpoint({ name: 'jobs', transport, concurrency: 4, codec: { encode: (v: Uint8Array) => v, decode: (b) => b }, handler: (_m, ctx) => void handled.add(ctx.messageId) });
      await endpoint.start();
      const ids = await Promise.all(sends);
      expect(ids).toHaveLength(40);
      for (let waited = 0; handled.size < 60 && waited < 20_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
      await endpoint.stop();
      expect(handled.size).toBe(60);
      expect(producer.stats.failed).toBe(0);
    } finally {
      await transport.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});
