import type { Redis } from 'ioredis';
import { ReplicasBehindError } from './errors.js';

/** How many replicas must have a write before redeliver confirms it, and for how long it waits for them. */
export interface ReplicaWait {
  /** 0: confirm a write once the primary has it. */
  readonly replicas: number;
  readonly timeoutMs: number;
}

/**
 * `WAIT <replicas> <timeoutMs>` on `client`, after a write on the same
 * connection: resolves once that many replicas have every write the
 * connection made so far, and rejects with a {@link ReplicasBehindError}
 * when fewer had them within the timeout. Does nothing when `replicas` is 0.
 * `what` names the write for the error.
 */
export async function waitForReplicas(client: Redis, wait: ReplicaWait, what: string): Promise<void> {
  if (wait.replicas === 0) return;
  const acknowledged = Number(await client.call('WAIT', wait.replicas, wait.timeoutMs));
  if (acknowledged < wait.replicas) throw new ReplicasBehindError(what, wait.replicas, acknowledged, wait.timeoutMs);
}
