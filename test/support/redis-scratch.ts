/**
 * A scratch space on the shared Redis: a key prefix of its own
 * (`test-<label>-<8 hex>`), clients named after it (so a test can find and
 * kill exactly its own connections), and a cleanup that closes them and
 * deletes every key of the prefix (`SCAN MATCH {prefix}:*`, then `DEL`).
 * Nothing outside the prefix is touched.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisKeys } from '../../src/transports/redis/keys.js';
import { ScriptRunner } from '../../src/transports/redis/scripts/runner.js';
import { REDIS_URL } from './brokers.js';

export interface RedisScratch {
  /** The key prefix of this scratch space. */
  readonly prefix: string;
  /** Its key names. */
  readonly keys: RedisKeys;
  /** The name its clients give their connections. */
  readonly connectionName: string;
  /** A new client of its own, closed by {@link cleanup}. */
  client(): Redis;
  /** A script runner on a new client of its own. */
  scripts(): ScriptRunner;
  /** Closes the clients and deletes every key of the prefix; resolves how many keys. */
  cleanup(): Promise<number>;
}

/** A scratch space labelled `label` (in its prefix and connection name). */
export function redisScratch(label: string): RedisScratch {
  const prefix = `test-${label}-${randomUUID().slice(0, 8)}`;
  const connectionName = `redeliver-${prefix}`;
  const clients: Redis[] = [];
  const client = () => {
    const c = new Redis(REDIS_URL, { connectionName, maxRetriesPerRequest: 1 });
    clients.push(c);
    return c;
  };
  return {
    prefix,
    keys: new RedisKeys(prefix),
    connectionName,
    client,
    scripts: () => new ScriptRunner(client()),
    async cleanup() {
      const admin = new Redis(REDIS_URL, { connectionName });
      try {
        return await deletePrefix(admin, prefix);
      } finally {
        admin.disconnect();
        for (const c of clients.splice(0)) c.disconnect();
      }
    },
  };
}

/** Deletes every key of `prefix` (`{prefix}:*`); resolves how many. */
export async function deletePrefix(client: Redis, prefix: string): Promise<number> {
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `{${prefix}}:*`, 'COUNT', 1_000);
    cursor = next;
    if (keys.length > 0) deleted += await client.del(...keys);
  } while (cursor !== '0');
  return deleted;
}
