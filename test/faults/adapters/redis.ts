/**
 * The fault suite on Redis: a server of the suite's own (its own port and
 * directory, `appendfsync always`), never the shared one on 6379. Each
 * scenario gets its own key prefix, so the streams, delayed sets and hashes
 * it reads at the end hold only its own messages. Depths and pending ids are
 * read off the server over the node's admin connection, not through the
 * transport under test; error-queue ids are ingested into an error store,
 * as on every transport.
 */
import { join } from 'node:path';
import { REDIS_PREFIX_ENV } from '../../../src/cli/open-transport.js';
import { GROUP, RedisKeys, type QueueKeys } from '../../../src/transports/redis/keys.js';
import { RedisNode } from '../../support/redis-node.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import type { FaultAdapter, Scope } from './types.js';

/** Options of {@link RedisFaultAdapter}. */
export interface RedisFaultAdapterOptions {
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
}

const SKIPS: Record<string, string> = {
  'error-queue-full':
    'a Redis stream has no bound that refuses a write (MAXLEN trims the oldest entries instead): an error stream cannot be full; maxLength bounds sends only',
  'cluster-leader-kill':
    'not covered: Redis replication is asynchronous, so a failover after a primary is killed can lose writes it already acknowledged',
};

/** Deletes a stream only when it holds no entry (`XLEN` 0); 1 when it is gone (or never was), else 0. */
const DELETE_IF_EMPTY = `#!lua
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`;

/** Entries read per `XRANGE` or `HSCAN` call. */
const PAGE = 1_000;

/** The Redis adapter, on a server of its own. */
export class RedisFaultAdapter implements FaultAdapter {
  readonly transport = 'redis';
  #node?: RedisNode;
  readonly #log: (line: string) => void;
  /** The keys of every queue of a live scope, by queue name (queue names are unique: they carry the scope's label). */
  readonly #queues = new Map<string, QueueKeys>();

  constructor(options: RedisFaultAdapterOptions = {}) {
    this.#log = options.log ?? (() => undefined);
  }

  skipReason(scenario: string): string | undefined {
    return SKIPS[scenario];
  }

  get node(): RedisNode {
    if (!this.#node) throw new Error('RedisFaultAdapter: start() first');
    return this.#node;
  }

  async start(): Promise<void> {
    this.#node = await RedisNode.start({ log: this.#log });
  }

  async stop(): Promise<void> {
    await this.#node?.stop();
  }

  async scope(label: string, dir: string): Promise<Scope> {
    const node = this.node;
    const queue = label;
    const errorQueue = `${label}.error`;
    const keys = new RedisKeys(label);
    const work = keys.of(queue);
    const error = keys.of(errorQueue);
    this.#queues.set(queue, work);
    this.#queues.set(errorQueue, error);
    const spec = (role: string): TransportSpec => ({ kind: 'redis', url: node.url, connectionName: `${label}-${role}`, keyPrefix: label });
    const harness = openSpec(spec('harness'));
    return {
      label,
      queue,
      errorQueue,
      cliTarget: node.url,
      cliEnv: { [REDIS_PREFIX_ENV]: label },
      spec,
      errorCount: async () => Number(await node.command('XLEN', error.stream)),
      delayedCount: async () => Number(await node.command('ZCARD', work.delayed)),
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: async () => [...(await this.#streamIds(work.stream)), ...(await this.#delayedIds(work.delayedData))],
      cleanup: async () => {
        this.#queues.delete(queue);
        this.#queues.delete(errorQueue);
        await harness.close();
        await this.#deletePrefix(label);
      },
    };
  }

  async killBroker(): Promise<void> {
    await this.node.kill9();
    await this.node.boot();
  }

  async restartBroker(): Promise<void> {
    await this.node.restart();
  }

  async stallBroker(ms: number): Promise<void> {
    this.node.stall();
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.node.resume();
    }
  }

  async cutConnections(scope: Scope): Promise<number> {
    return this.node.killClients(`${scope.label}-`, (name) => !name.startsWith(`${scope.label}-harness`));
  }

  async memoryAlarm(on: boolean): Promise<void> {
    await this.node.setMaxmemory(on ? 1 : 0);
  }

  /** `maxmemory` 1 (`noeviction`): every script that writes a retry or error-queue copy fails with OOM; acks, which only free memory, still run. */
  async refuseSettlements(_scope: Scope, on: boolean): Promise<void> {
    await this.node.setMaxmemory(on ? 1 : 0);
  }

  async deleteQueueIfEmpty(queue: string): Promise<boolean> {
    return Number(await this.node.command('EVAL', DELETE_IF_EMPTY, 1, this.#keysOf(queue).stream)) === 1;
  }

  async readyCount(queue: string): Promise<number> {
    const { stream } = this.#keysOf(queue);
    const length = Number(await this.node.command('XLEN', stream));
    const summary = (await this.node.command('XPENDING', stream, GROUP).catch(() => [0])) as unknown[];
    return length - Number(summary[0] ?? 0);
  }

  #keysOf(queue: string): QueueKeys {
    const keys = this.#queues.get(queue);
    if (!keys) throw new Error(`RedisFaultAdapter: ${queue} is not a queue of a live scope`);
    return keys;
  }

  /** The message ids (field `i`) of every entry in `stream`, ready or leased. */
  async #streamIds(stream: string): Promise<string[]> {
    const ids: string[] = [];
    for (let start = '-'; ; ) {
      const page = (await this.node.command('XRANGE', stream, start, '+', 'COUNT', PAGE)) as [string, string[]][];
      for (const [, fields] of page) {
        const at = fields.findIndex((field, i) => i % 2 === 0 && field === 'i');
        if (at >= 0) ids.push(fields[at + 1]!);
      }
      if (page.length < PAGE) return ids;
      start = `(${page[page.length - 1]![0]}`;
    }
  }

  /** The message ids of every delayed retry: the values of the `<token>:i` fields of `hash`. */
  async #delayedIds(hash: string): Promise<string[]> {
    const ids: string[] = [];
    let cursor = '0';
    do {
      const [next, flat] = (await this.node.command('HSCAN', hash, cursor, 'MATCH', '*:i', 'COUNT', PAGE)) as [string, string[]];
      for (let i = 0; i + 1 < flat.length; i += 2) ids.push(flat[i + 1]!);
      cursor = next;
    } while (cursor !== '0');
    return ids;
  }

  /** Deletes every key under the scope's hash tag. */
  async #deletePrefix(prefix: string): Promise<void> {
    let cursor = '0';
    do {
      const [next, keys] = (await this.node.command('SCAN', cursor, 'MATCH', `{${prefix}}:*`, 'COUNT', PAGE)) as [string, string[]];
      if (keys.length > 0) await this.node.command('DEL', ...keys);
      cursor = next;
    } while (cursor !== '0');
  }
}
