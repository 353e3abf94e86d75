/**
 * What differs on Redis Cluster: commands go to the node that serves their
 * key's hash slot, and commands about a connection (`CLIENT ID`,
 * `CLIENT UNBLOCK`, `CONFIG`) go to one node in particular. Every key of a
 * transport shares its prefix's hash tag, so one node serves them all at a
 * time; these helpers name it.
 */
import type { Cluster, Redis } from 'ioredis';

/** The client the transport sends commands on: one server's, or a Redis Cluster's. */
export type RedisClient = Redis | Cluster;

/** How many hash slots a Redis Cluster has. */
const SLOTS = 16_384;

/** Whether `client` is a Redis Cluster client. */
export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}

/** The hash slot of `key` on Redis Cluster: CRC16 (XMODEM) of its hash tag, or of the whole key when it has none, modulo 16384. */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= bytes[i]! << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % SLOTS;
}

/** `host:port` of a node's connection, as ioredis names cluster nodes. */
export function addressOf(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/**
 * The connection of `client` to the primary that serves `key` now, as the
 * client knows the slots: `client` itself on a single server; undefined on
 * a cluster whose slots it has not learnt yet.
 */
export function nodeOf(client: RedisClient, key: string): Redis | undefined {
  if (!isCluster(client)) return client;
  const address = client.slots[keySlot(key)]?.[0];
  return address === undefined ? undefined : nodeAt(client, address);
}

/** The connection of `client` to the node at `address` (`host:port`): `client` itself on a single server. */
export function nodeAt(client: RedisClient, address: string): Redis | undefined {
  if (!isCluster(client)) return client;
  return client.nodes('all').find((node) => addressOf(node) === address);
}

/**
 * The connection to the server that holds `key` (on a cluster, the primary
 * serving its slot), once `client` is connected; throws when a cluster
 * client knows no node for the slot.
 */
export async function serverOf(client: RedisClient, key: string): Promise<Redis> {
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  const node = nodeOf(client, key);
  if (node === undefined) throw new Error(`redis: no node of the cluster serves the slot of ${key}`);
  return node;
}
