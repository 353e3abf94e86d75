/**
 * How a fault-suite process (worker, producer, the harness itself) builds
 * its transport: a plain-JSON description passed to child processes on the
 * command line, so every process of a scenario uses the same store or broker.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../../src/logger.js';
import type { Transport } from '../../src/transport/types.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { RocketMqTransport } from '../../src/transports/rocketmq/index.js';
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
      /** Sentinels to find the primary through (then `url` is not used), and the name they monitor it under. Default none. */
      readonly sentinels?: readonly { readonly host: string; readonly port: number }[];
      readonly sentinelName?: string;
      /** The transport's `waitReplicas`. Default 0. */
      readonly waitReplicas?: number;
    }
  | {
      readonly kind: 'jetstream';
      /** The server URLs this process may connect to; servers the cluster announces are ignored. */
      readonly servers: readonly string[];
      /** Unique per process, for the server's monitoring. */
      readonly connectionName: string;
      /** The scenario's own stream and subject prefix, so its streams are apart from every other scenario's. */
      readonly prefix: string;
      /** Copies of each stream: 1 on one server, 3 on the cluster. */
      readonly replicas: number;
    }
  | {
      readonly kind: 'nsq';
      /** nsqd TCP addresses this process publishes to (and consumes from, without `lookupd`). */
      readonly nsqd: readonly string[];
      /** nsqlookupd HTTP addresses consumers find nsqd through. Default none. */
      readonly lookupd?: readonly string[];
      /** The nsqd HTTP address of each TCP address (a scenario's proxy port maps to its nsqd's HTTP port). */
      readonly httpAddresses: Readonly<Record<string, string>>;
      /** Unique per process, shown in nsqd's `/stats`. */
      readonly connectionName: string;
      /** The channel consumers read through. Default the transport's (`redeliver`); the bare client's is `bare`. */
      readonly channel?: string;
      /** The transport's `leaseMarkMs`. Default 0: leases count from arrival. */
      readonly leaseMarkMs?: number;
    }
  | {
      readonly kind: 'rocketmq';
      /** The gRPC proxy, `host:port`: the scenario's TCP proxy in front of it, so its connections can be cut. */
      readonly endpoints: string;
      readonly nameServer: string;
      /** The scenario's own consumer group, so its offsets are apart from every other scenario's. */
      readonly consumerGroup: string;
      /** Unique per process, in the proxy's client list. */
      readonly connectionName: string;
    };

/** Opens the transport `spec` describes, with default settings. */
export function openSpec(spec: TransportSpec): Transport {
  if (spec.kind === 'sqlite') return new SqliteTransport({ path: spec.path, pollIntervalMs: 50 });
  if (spec.kind === 'redis') return openRedis(spec);
  if (spec.kind === 'nsq') {
    return new NsqTransport({
      nsqd: spec.nsqd.length > 0 ? spec.nsqd : undefined,
      lookupd: spec.lookupd,
      lookupdPollIntervalMs: 1_000,
      httpAddresses: spec.httpAddresses,
      connectionName: spec.connectionName,
      channel: spec.channel,
      leaseMarkMs: spec.leaseMarkMs,
      logger: outputLogger,
    });
  }
  if (spec.kind === 'jetstream') {
    return new JetStreamTransport({
      servers: spec.servers,
      connectionName: spec.connectionName,
      prefix: spec.prefix,
      replicas: spec.replicas,
      connectionOptions: { ignoreClusterUpdates: true },
      logger: { ...outputLogger, debug: outputLine('debug') },
    });
  }
  if (spec.kind === 'rocketmq') {
    return new RocketMqTransport({
      endpoints: spec.endpoints,
      nameServer: spec.nameServer,
      consumerGroup: spec.consumerGroup,
      connectionName: spec.connectionName,
      logger: outputLogger,
    });
  }
  return new RabbitMqTransport({
    url: spec.url,
    connectionName: spec.connectionName,
    topologyPrefix: spec.topologyPrefix,
    queueType: spec.queueType,
  });
}

/** A Redis transport on the server at `url`, or on a Sentinel-aware client of its own that it closes with it. */
function openRedis(spec: Extract<TransportSpec, { kind: 'redis' }>): Transport {
  const { connectionName, keyPrefix, waitReplicas } = spec;
  if (spec.sentinels === undefined) return new RedisTransport({ url: spec.url, connectionName, keyPrefix, waitReplicas });
  const client = new Redis({ sentinels: [...spec.sentinels], name: spec.sentinelName, connectionName });
  client.on('error', () => undefined);
  const transport = new RedisTransport({ client, connectionName, keyPrefix, waitReplicas, logger: outputLogger });
  const close = transport.close.bind(transport);
  transport.close = async () => {
    await close();
    client.disconnect();
  };
  return transport;
}

/** Writes the transport's log lines, time-stamped, to the process's output (a child's `.out` file in the evidence). */
const outputLogger: Logger = {
  info: outputLine('info'),
  warn: outputLine('warn'),
  error: outputLine('error'),
};

/** One level's lines, as {@link outputLogger} writes them. */
function outputLine(level: string): (fields: object, message: string) => void {
  return (fields, message) => console.error(`${new Date().toISOString()} ${level} ${message} ${JSON.stringify(fields)}`);
}

/** The same spec, with the connection named `connectionName` (every transport but SQLite, which has no connection). */
export function named(spec: TransportSpec, connectionName: string): TransportSpec {
  return spec.kind === 'sqlite' ? spec : { ...spec, connectionName };
}
