/**
 * Fills an error queue with the benchmark's entries, fast. The first entry
 * goes through a real `deadLetter`, so the queue is an error queue the way
 * an endpoint makes one; the rest are written the way that `deadLetter`
 * writes them, without an endpoint in between: on RabbitMQ published
 * straight to the queue on a confirm channel, pipelined, each with its own
 * `redeliver-entry-id`; on SQLite inserted into `error_messages` in one
 * transaction.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { withEntryId } from '../../src/transports/rabbitmq/entry-key.js';
import { encodeHeaders } from '../../src/transports/rabbitmq/wire-headers.js';
import { deadLetter } from '../../test/error-store/support.js';
import { entryBody, entryHeaders, failedAtOf } from './entries.js';

/** Publishes awaited for confirms at once. */
const CONFIRM_WINDOW = 2_000;

/** What to fill: `n` entries failed on `workQueue` over the hour before `now`, into `errorQueue`. */
export interface FillPlan {
  readonly workQueue: string;
  readonly errorQueue: string;
  readonly n: number;
  readonly now: number;
}

/** Entry 0 through the transport's own `deadLetter`: the queue becomes an error queue. */
async function firstByDeadLetter(transport: Transport, plan: FillPlan): Promise<void> {
  const headers = entryHeaders(0, failedAtOf(0, plan.n, plan.now), plan.workQueue);
  await deadLetter(transport, plan.workQueue, plan.errorQueue, [{ id: randomUUID(), body: entryBody(0).toString(), headers }]);
}

/** Fills a RabbitMQ error queue; `transport` is connected to the broker at `url`. */
export async function fillRabbitMq(url: string, transport: Transport, plan: FillPlan): Promise<void> {
  await firstByDeadLetter(transport, plan);
  const connection = await amqp.connect(url, { noDelay: true });
  try {
    const channel = await connection.createConfirmChannel();
    for (let i = 1; i < plan.n; i++) {
      const headers = withEntryId(entryHeaders(i, failedAtOf(i, plan.n, plan.now), plan.workQueue));
      const accepted = channel.sendToQueue(plan.errorQueue, entryBody(i), { persistent: true, messageId: randomUUID(), headers: encodeHeaders(headers, 'lenient').table });
      if (!accepted) await new Promise((resolve) => channel.once('drain', resolve));
      if (i % CONFIRM_WINDOW === 0) await channel.waitForConfirms();
    }
    await channel.waitForConfirms();
    await channel.close();
  } finally {
    await connection.close();
  }
}

/** Fills a SQLite error queue in the transport's file at `path`. */
export async function fillSqlite(path: string, transport: Transport, plan: FillPlan): Promise<void> {
  await firstByDeadLetter(transport, plan);
  const db = new Database(path, { timeout: 5_000 });
  try {
    const insert = db.prepare(
      `INSERT INTO error_messages (queue, id, body, headers, visible_at, deliveries, enqueued_at, original_queue, failed_at, reason, error_name)
       VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 1; i < plan.n; i++) {
        const failedAt = failedAtOf(i, plan.n, plan.now);
        const headers = entryHeaders(i, failedAt, plan.workQueue);
        insert.run(
          plan.errorQueue,
          randomUUID(),
          entryBody(i),
          JSON.stringify(headers),
          plan.now,
          plan.now,
          plan.workQueue,
          headers[HEADER.failureTime]!,
          headers[HEADER.failureReason]!,
          headers[HEADER.failureErrorName]!,
        );
      }
    }).immediate();
  } finally {
    db.close();
  }
}
