import type { Redis } from 'ioredis';
import { nodeOf, serverOf, type RedisClient } from './cluster.js';
import { ReplicasBehindError } from './errors.js';

/** How many replicas must have a write before redeliver confirms it, and for how long it waits for them. */
export interface ReplicaWait {
  /** 0: confirm a write once the primary has it. */
  readonly replicas: number;
  readonly timeoutMs: number;
}

/** The connection a write is about to go on, and how often it had closed: see {@link replicaMark}. */
export interface ReplicaMark {
  readonly server: Redis | undefined;
  readonly closes: number;
}

/** How often each connection closed, counted from when a write on it was first marked. */
const closes = new WeakMap<Redis, { count: number }>();

/**
 * Marks the connection a write of `key` is about to go on (on a cluster,
 * the one to the primary serving `key`, once the client knows the slots).
 * Taken before the write: {@link waitForReplicas} refuses to confirm it when
 * that connection closed since, because ioredis sends a `WAIT` that had no
 * answer again on the new connection, where it counts nothing the old one
 * wrote.
 */
export function replicaMark(client: RedisClient, key: string, wait: ReplicaWait): ReplicaMark | undefined {
  if (wait.replicas === 0) return undefined;
  const server = nodeOf(client, key);
  if (server === undefined) return { server, closes: 0 };
  let counter = closes.get(server);
  if (counter === undefined) {
    const created = { count: 0 };
    server.on('close', () => created.count++);
    closes.set(server, (counter = created));
  }
  return { server, closes: counter.count };
}

/**
 * `WAIT <replicas> <timeoutMs>` after a write of `key` marked with `mark`,
 * on the same connection (on a cluster, the client's connection to the
 * primary serving `key`): resolves once that many replicas have every write
 * the connection made so far, and rejects with a
 * {@link ReplicasBehindError} when fewer had them within the timeout, or
 * when the connection closed between the mark and the answer. Does nothing
 * when `replicas` is 0. `what` names the write for the error.
 */
export async function waitForReplicas(client: RedisClient, key: string, wait: ReplicaWait, what: string, mark: ReplicaMark | undefined): Promise<void> {
  if (wait.replicas === 0) return;
  const server = await serverOf(client, key);
  const acknowledged = Number(await server.call('WAIT', wait.replicas, wait.timeoutMs));
  const sameConnection = mark !== undefined && (mark.server === undefined || (mark.server === server && closes.get(server)?.count === mark.closes));
  if (!sameConnection) throw ReplicasBehindError.connectionLost(what);
  if (acknowledged < wait.replicas) throw new ReplicasBehindError(what, wait.replicas, acknowledged, wait.timeoutMs);
}
