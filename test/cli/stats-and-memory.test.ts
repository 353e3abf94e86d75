/**
 * `redeliver stats`, the commands on the memory transport, progress bars,
 * and output safety.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Delivery, Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { cli, drain, fillErrorQueue, sqlite, tempFolder, waitFor, wrap } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

describe('stats', () => {
  it('shows ready, delayed and in-flight messages of every queue on a SQLite file', async () => {
    const file = folder.path('stats.db');
    const transport = sqlite(file);
    try {
      await fillErrorQueue(transport, { timeout: 2, invalid: 1 });
      for (let i = 0; i < 3; i++) await transport.send('payments', { id: `p-${i}`, body: new Uint8Array([i]), headers: {} });
      const got: Delivery[] = [];
      const sub = await transport.consume('payments', (d) => void got.push(d), { prefetch: 2 });
      await waitFor(() => got.length === 2, 5_000, 'two deliveries');
      await sub.pause();
      await got[0]!.retryLater(60_000, { ...got[0]!.headers });
      // got[1] stays unsettled: in flight.

      const json = JSON.parse((await cli(['stats', file, '--json'])).stdout);
      expect(json.queues).toEqual([
        { queue: 'orders', kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
        { queue: 'payments', kind: 'work', ready: 1, delayed: 1, inFlight: 1 },
        { queue: 'error', kind: 'error', ready: 3, delayed: 0, inFlight: 0 },
      ]);

      const run = await cli(['stats', file]);
      expect(run.code).toBe(0);
      expect(run.stdout.split('\n')).toEqual([
        'QUEUE     KIND   READY  DELAYED  IN FLIGHT',
        'orders    work       0        0          0',
        'payments  work       1        1          1',
        'error     error      3        0          0',
        '',
      ]);

      const some = JSON.parse((await cli(['stats', file, '--queue', 'error', 'payments', '--json'])).stdout);
      expect(some.queues.map((q: { queue: string }) => q.queue)).toEqual(['error', 'payments']);
      const repeated = JSON.parse((await cli(['stats', file, '--queue', 'payments', '--queue', 'nothing-here', '--json'])).stdout);
      expect(repeated.queues).toEqual([
        { queue: 'payments', kind: 'work', ready: 1, delayed: 1, inFlight: 1 },
        { queue: 'nothing-here', kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
      ]);
      await sub.close();
    } finally {
      await transport.close();
    }
  });

  it('says when there are no queues', async () => {
    const run = await cli(['stats', 'mem'], { openTransport: async () => wrap(new MemoryTransport()) });
    expect(run).toEqual({ code: 0, stdout: 'no queues in mem\n', stderr: '' });
  });
});

describe('on the memory transport', () => {
  it('lists, retries everything once and reports, with a progress bar on a terminal', async () => {
    const memory = new MemoryTransport();
    const open = async (): Promise<Transport> => wrap(memory);
    const filled = await fillErrorQueue(memory, { timeout: 80, refused: 70 });

    const list = await cli(['errors', 'list', 'mem', '--json'], { openTransport: open, stderrIsTTY: true });
    const groups = JSON.parse(list.stdout).groups;
    expect(groups.map((g: { count: number; errorName: string }) => [g.errorName, g.count])).toEqual([
      ['TimeoutError', 80],
      ['Error', 70],
    ]);
    // Reading 150 entries on a terminal draws a bar on stderr, then clears it.
    expect(list.stderr).toMatch(/^\rreading \[#+-*\] +\d+% \d+\/150/);
    expect(list.stderr).toContain('\rreading [##############################] 100% 150/150');
    expect(list.stderr.endsWith('\r\u001b[2K')).toBe(true);

    const retry = await cli(['errors', 'retry', 'mem', '--all'], { openTransport: open, stderrIsTTY: true });
    expect(retry.code).toBe(0);
    expect(retry.stdout).toBe('sent back 150 (orders: 150), already gone 0\n');
    expect(retry.stderr).toContain('\rsending back [##############################] 100% 150/150');

    const got = await drain(memory, 'orders', 150, 50);
    expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.refused].sort());
    expect(got.every((d) => d.headers[HEADER.replayCount] === '1')).toBe(true);
    await memory.close();
  });

  it('draws no progress bar when stderr is not a terminal, or for a few messages', async () => {
    const memory = new MemoryTransport();
    await fillErrorQueue(memory, { timeout: 120 });
    const open = async (): Promise<Transport> => wrap(memory);
    const piped = await cli(['errors', 'retry', 'mem', '--all'], { openTransport: open, stderrIsTTY: false });
    expect(piped).toEqual({ code: 0, stdout: 'sent back 120 (orders: 120), already gone 0\n', stderr: '' });
    await fillErrorQueue(memory, { timeout: 5 }, 'small');
    const small = await cli(['errors', 'list', 'mem'], { openTransport: open, stderrIsTTY: true });
    expect(small.stderr).toBe('');
    await memory.close();
  });

  it('never prints control characters from headers or bodies to the terminal', async () => {
    const memory = new MemoryTransport();
    await memory.send('orders', { id: 'evil\u001b]0;pwned\u0007', body: new TextEncoder().encode('line 1\nline 2 \u001b[2J'), headers: { 'x-\u001b[31mred': 'a\u001b[0m\rb' } });
    const got: Delivery[] = [];
    const sub = await memory.consume('orders', (d) => void got.push(d), { prefetch: 1 });
    await waitFor(() => got.length === 1);
    await got[0]!.deadLetter('error', {
      ...got[0]!.headers,
      [HEADER.failureQueue]: 'orders',
      [HEADER.failureReason]: 'retries-exhausted',
      [HEADER.failureErrorName]: 'Evil\u001b[1mError',
      [HEADER.failureMessage]: 'clear \u001b[2J screen\nand \u202eesrever',
      [HEADER.failureStack]: 'Evil: x\n    at \u001b[8mhidden (file.js:1:2)',
      [HEADER.failureTime]: '2026-01-01T00:00:00.000Z',
    });
    await sub.close();
    const open = async (): Promise<Transport> => wrap(memory);
    const list = await cli(['errors', 'list', 'mem'], { openTransport: open });
    const [entry] = await memory.errorQueue.browse('error');
    const show = await cli(['errors', 'show', 'mem', entry!.key], { openTransport: open });
    for (const out of [list.stdout, show.stdout]) {
      expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f\u202e]/);
      expect(out).toContain('\\x1b');
    }
    expect(show.stdout).toContain('  x-\\x1b[31mred: a\\x1b[0m\\rb');
    // A body with an escape character is shown as hex, not as text.
    expect(show.stdout).toContain('body (binary, hex, 18 bytes)\n  00000000  6c 69 6e 65 20 31 0a');
    // JSON output carries the values exactly; JSON escapes them itself.
    const json = JSON.parse((await cli(['errors', 'show', 'mem', entry!.key, '--json'], { openTransport: open })).stdout);
    expect(json.messageId).toBe('evil\u001b]0;pwned\u0007');
    await memory.close();
  });
});
