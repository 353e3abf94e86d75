import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { MessageContext } from '../../src/endpoint/context.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const child = fileURLToPath(new URL('../fixtures/sqlite-crash-child.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'redeliver-sqlite-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

function exited(proc: ChildProcess): Promise<NodeJS.Signals | number | null> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.signalCode ?? proc.exitCode);
    else proc.once('exit', (code, signal) => resolve(signal ?? code));
  });
}

it('a message held by a worker that was killed comes back after the lease and is handled once more', async () => {
  const path = join(dir, 'crash.db');
  const marker = join(dir, 'marker.json');
  const leaseMs = 500;

  const producer = new SqliteTransport({ path });
  await producer.send('jobs', { id: 'job-1', body: new TextEncoder().encode('payload'), headers: {} });
  await producer.close();

  let stderr = '';
  const proc = spawn(process.execPath, ['--import', 'tsx', child, path, 'jobs', marker, String(leaseMs)], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  proc.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    const seen = await waitFor(
      'the child to receive the message',
      () => (existsSync(marker) ? (JSON.parse(readFileSync(marker, 'utf8')) as { id: string; deliveryCount: number }) : undefined),
      20_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; child stderr: ${stderr}`);
    });
    expect(seen).toMatchObject({ id: 'job-1', deliveryCount: 1 });
  } finally {
    proc.kill('SIGKILL');
  }
  expect(await exited(proc)).toBe('SIGKILL');

  // The dead worker's claim is still in the file, leased until `leaseEnds`.
  const db = new Database(path, { readonly: true });
  let leaseEnds: number;
  try {
    const rows = db.prepare('SELECT deliveries, lease IS NOT NULL AS leased, visible_at FROM messages').all() as {
      deliveries: number; leased: number; visible_at: number;
    }[];
    expect(rows).toEqual([{ deliveries: 1, leased: 1, visible_at: expect.any(Number) }]);
    leaseEnds = rows[0]!.visible_at;
  } finally {
    db.close();
  }

  const transport = new SqliteTransport({ path });
  const handled: { id: string; deliveryCount: number; at: number }[] = [];
  const endpoint = new Endpoint<Uint8Array>({
    name: 'survivor',
    queue: 'jobs',
    transport,
    codec: bytesCodec,
    leaseMs,
    handler: (_body, context: MessageContext) => {
      handled.push({ id: context.messageId, deliveryCount: context.deliveryCount, at: Date.now() });
    },
  });
  const acked = new Promise<void>((resolve) => endpoint.on('handled', () => resolve()));
  await endpoint.start();
  try {
    await Promise.race([acked, sleep(10_000).then(() => Promise.reject(new Error('the message did not come back')))]);
  } finally {
    await endpoint.stop();
    await transport.close();
  }

  expect(handled).toHaveLength(1);
  expect(handled[0]).toMatchObject({ id: 'job-1', deliveryCount: 2 });
  // Not before the dead worker's lease ended, and soon after.
  expect(handled[0]!.at).toBeGreaterThanOrEqual(leaseEnds);
  expect(handled[0]!.at - leaseEnds).toBeLessThan(3_000);
  const after = new Database(path, { readonly: true });
  try {
    expect(after.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(0);
  } finally {
    after.close();
  }
}, 40_000);
