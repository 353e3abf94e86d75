/**
 * How a fault-suite process (worker, producer, the harness itself) builds
 * its transport: a plain-JSON description passed to child processes on the
 * command line, so every process of a scenario uses the same store or broker.
 */
import type { Transport } from '../../src/transport/types.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';

/** A transport, described in JSON. */
export type TransportSpec =
  | { readonly kind: 'sqlite'; readonly path: string }
  | {
      readonly kind: 'rabbitmq';
      readonly url: string;
      /** Unique per process, so the harness can cut exactly this process's connection. */
      readonly connectionName: string;
      readonly topologyPrefix: string;
      readonly queueType: 'classic' | 'quorum';
    }
  | {
      readonly kind: 'redis';
      readonly url: string;
      /** Unique per process, so the harness can cut exactly this process's connections (`CLIENT KILL ID`). */
      readonly connectionName: string;
      /** The scenario's own key prefix, so its keys are apart from every other scenario's. */
      readonly keyPrefix: string;
    };

/** Opens the transport `spec` describes, with default settings. */
export function openSpec(spec: TransportSpec): Transport {
  if (spec.kind === 'sqlite') return new SqliteTransport({ path: spec.path, pollIntervalMs: 50 });
  if (spec.kind === 'redis') return new RedisTransport({ url: spec.url, connectionName: spec.connectionName, keyPrefix: spec.keyPrefix });
  return new RabbitMqTransport({
    url: spec.url,
    connectionName: spec.connectionName,
    topologyPrefix: spec.topologyPrefix,
    queueType: spec.queueType,
  });
}

/** The same spec, with the connection named `connectionName` (RabbitMQ and Redis; SQLite has no connection). */
export function named(spec: TransportSpec, connectionName: string): TransportSpec {
  return spec.kind === 'sqlite' ? spec : { ...spec, connectionName };
}
