/**
 * A real `redeliver errors ingest` process killed with SIGKILL half-way,
 * then run again: every entry ends up in the store exactly once and none is
 * left in the error queue. On SQLite and on the shared RabbitMQ.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorStore } from '../../src/error-store/store.js';
import type { Transport } from '../../src/transport/types.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deadLetter, failureHeaders } from '../error-store/support.js';
import { sqlite, tempFolder, waitFor } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

const skipRabbit = await rabbitSkipReason();

/** Starts `redeliver <args>` as a child process; resolves its exit code and output when it ends. */
function start(args: readonly string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, exited };
}

/** Stored entries by message id, any status. */
function storedIds(path: string): string[] {
  const store = ErrorStore.open(path);
  try {
    return [...store.export({ status: 'any' })].map((e) => e.messageId);
  } finally {
    store.close();
  }
}

function storedCount(path: string): number {
  const store = ErrorStore.open(path);
  try {
    return store.count({ status: 'any' });
  } finally {
    store.close();
  }
}

/**
 * Fills `errorQueue`, starts an ingest, kills it with SIGKILL once some
 * but not all entries are stored, then runs `--once` to the end.
 */
async function killAndResume(transport: Transport, target: string, errorQueue: string, total: number): Promise<{ atKill: number; ids: string[]; left: number }> {
  const workQueue = `${errorQueue}-work`;
  const messages = Array.from({ length: total }, (_, i) => ({ id: `m-${i}`, headers: failureHeaders({ message: `failure ${i}`, queue: workQueue }) }));
  await deadLetter(transport, workQueue, errorQueue, messages);
  const store = folder.path(`${errorQueue}-store.db`);
  const args = ['errors', 'ingest', target, '--store', store, '--error-queue', errorQueue, '--batch-size', '10'];
  const first = start(args);
  await waitFor(() => {
    try {
      return storedCount(store) >= total / 10;
    } catch {
      return false; // the child is still creating the file
    }
  }, 30_000, 'the first run to store a tenth');
  first.child.kill('SIGKILL');
  const killed = await first.exited;
  expect(killed.signal).toBe('SIGKILL');
  const atKill = storedCount(store);
  const second = await start([...args, '--once', '--json']).exited;
  expect(second.stderr).toBe('');
  expect(second.code).toBe(0);
  const summary = JSON.parse(second.stdout);
  expect(summary.stored).toBe(total - atKill);
  const left = await transport.errorQueue!.count(errorQueue);
  return { atKill, ids: storedIds(store), left };
}

describe('errors ingest killed half-way', () => {
  it('on SQLite: every entry stored once, none left in the error queue', { timeout: 60_000 }, async () => {
    const file = folder.path('kill.db');
    const transport = sqlite(file);
    try {
      const total = 3_000;
      const { atKill, ids, left } = await killAndResume(transport, file, 'error', total);
      expect(atKill).toBeLessThan(total);
      expect(ids).toHaveLength(total);
      expect(new Set(ids).size).toBe(total);
      expect(left).toBe(0);
    } finally {
      await transport.close();
    }
  });

  it.skipIf(Boolean(skipRabbit))('on RabbitMQ: every entry stored once, none left in the error queue', { timeout: 90_000 }, async () => {
    const errorQueue = `cli-ingest-kill-${randomUUID().slice(0, 8)}`;
    const transport = new RabbitMqTransport({ url: RABBITMQ_URL });
    try {
      const total = 1_500;
      const { atKill, ids, left } = await killAndResume(transport, RABBITMQ_URL, errorQueue, total);
      expect(atKill).toBeLessThan(total);
      expect(ids).toHaveLength(total);
      expect(new Set(ids).size).toBe(total);
      expect(left).toBe(0);
    } finally {
      await transport.close();
      const connection = await amqp.connect(RABBITMQ_URL);
      const channel = await connection.createChannel();
      for (const name of [errorQueue, `${errorQueue}-work`]) await channel.deleteQueue(name).catch(() => undefined);
      await connection.close();
    }
  });
});
