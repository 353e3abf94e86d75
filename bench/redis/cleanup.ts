/**
 * Deleting every key a side of the benchmark wrote, and checking that none
 * is left: the server is shared, so each side writes only under a prefix of
 * its own.
 */
import { Redis } from 'ioredis';

/** Deletes every key matching `pattern` (SCAN + UNLINK) and returns how many there were. */
export async function deleteKeys(url: string, pattern: string): Promise<number> {
  const client = new Redis(url, { connectionName: 'redeliver-bench-cleanup', lazyConnect: true });
  await client.connect();
  try {
    let deleted = 0;
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
      cursor = next;
      if (keys.length > 0) deleted += await client.unlink(...keys);
    } while (cursor !== '0');
    return deleted;
  } finally {
    client.disconnect();
  }
}

/** Throws when any key matches `pattern`. */
export async function assertNoKeys(url: string, pattern: string): Promise<void> {
  const left = await deleteKeys(url, pattern);
  if (left > 0) throw new Error(`${left} keys matching ${pattern} were left behind (now deleted)`);
}
