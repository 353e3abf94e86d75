import { serverOf, type RedisClient } from './cluster.js';
import { ReplicasBehindError } from './errors.js';

/** How many replicas must have a write before redeliver confirms it, and for how long it waits for them. */
export interface ReplicaWait {
  /** 0: confirm a write once the primary has it. */
  readonly replicas: number;
  readonly timeoutMs: number;
}

/**
 * `WAIT <replicas> <timeoutMs>` on `client`, after a write of `key` on the
 * same connection (on a cluster, the client's connection to the primary
 * serving `key`): resolves once that many replicas have every write the
 * connection made so far, and rejects with a {@link ReplicasBehindError}
 * when fewer had them within the timeout. Does nothing when `replicas` is 0.
 * `what` names the write for the error.
 */
export async function waitForReplicas(client: RedisClient, key: string, wait: ReplicaWait, what: string): Promise<void> {
  if (wait.replicas === 0) return;
  const server = await serverOf(client, key);
  const acknowledged = Number(await server.call('WAIT', wait.replicas, wait.timeoutMs));
  if (acknowledged < wait.replicas) throw new ReplicasBehindError(what, wait.replicas, acknowledged, wait.timeoutMs);
}
