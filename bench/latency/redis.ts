/**
 * Redis in `npm run bench -- latency`: a RedisTransport on a key prefix of
 * the run's own, and bare ioredis beside it (`XADD`; a read loop of
 * `XREADGROUP COUNT P BLOCK` on a connection of its own, `XACK` of each
 * entry on another).
 */
import { Redis } from 'ioredis';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { deleteKeys } from '../redis/cleanup.js';
import { readStamp, type BrokerCase, type CaseSettings, type Rig } from './rig.js';

const GROUP = 'bench';
/** How long one blocked read waits, as the transport's default poll. */
const BLOCK_MS = 1_000;

type Reply = [stream: string, entries: [id: string, fields: Buffer[]][]][] | null;

export function redisCase(settings: CaseSettings, url: string): BrokerCase {
  const bareKey = `bench-latency-${settings.token}-bare`;
  const keyPrefix = `bench-latency-${settings.token}-rdl`;
  return {
    name: 'redis',
    bareName: 'ioredis XREADGROUP + XACK',
    bare: async (onHandled): Promise<Rig> => {
      const command = new Redis(url, { connectionName: 'redeliver-bench-latency-bare' });
      const reader = new Redis(url, { connectionName: 'redeliver-bench-latency-reader' });
      await command.xgroup('CREATE', bareKey, GROUP, '$', 'MKSTREAM');
      let stopped = false;
      let failure: unknown;
      const loop = (async () => {
        while (!stopped) {
          const reply = (await reader.xreadgroupBuffer('GROUP', GROUP, 'c', 'COUNT', settings.prefetch, 'BLOCK', BLOCK_MS, 'STREAMS', bareKey, '>')) as Reply;
          for (const [, entries] of reply ?? []) {
            for (const [id, fields] of entries) {
              onHandled(readStamp(fields[1]!), performance.now());
              command.xack(bareKey, GROUP, id).catch((error: unknown) => (failure ??= error));
            }
          }
        }
      })();
      return {
        send: async (body) => {
          if (failure !== undefined) throw failure;
          await command.xadd(bareKey, '*', 'b', body);
        },
        close: async () => {
          stopped = true;
          reader.disconnect();
          await loop.catch(() => undefined);
          await command.quit();
        },
      };
    },
    transport: (side) => ({ transport: new RedisTransport({ url, keyPrefix, connectionName: 'redeliver-bench-latency' }), queue: `latency-${side}` }),
    cleanup: async () => {
      await deleteKeys(url, bareKey);
      await deleteKeys(url, `{${keyPrefix}}:*`);
    },
  };
}
