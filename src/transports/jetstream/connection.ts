/**
 * The transport's NATS connection and its JetStream clients: the one the
 * application passed in, or one of the transport's own that reconnects
 * forever with the transport's backoff.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { ResolvedJetStreamOptions } from './options.js';

/** A connection with its JetStream clients. */
export interface JetStreamClients {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
}

/** Told when the connection comes back after a disconnection: pull requests sent before it are gone. */
export type ReconnectListener = () => void;

/**
 * Connects (or takes the given connection), builds the JetStream clients,
 * and reports reconnections to `onReconnect`. The own connection waits for
 * its first server as long as it takes, trying again with `reconnect`.
 */
export async function openClients(options: ResolvedJetStreamOptions, onReconnect: ReconnectListener): Promise<JetStreamClients> {
  const nc = options.connection ?? (await connectOwn(options));
  const js = jetstream(nc, { timeout: options.apiTimeoutMs });
  const jsm = await jetstreamManager(nc, { timeout: options.apiTimeoutMs, checkAPI: false });
  void watchStatus(nc, options, onReconnect);
  return { nc, js, jsm };
}

async function connectOwn(options: ResolvedJetStreamOptions): Promise<NatsConnection> {
  let attempt = 0;
  let previousDelayMs: number | undefined;
  let elapsedMs = 0;
  // The client asks for the wait each time it wakes up to reconnect, also when it only waited on: the backoff moves on after a dial only.
  let dials = 0;
  let delayedAfterDial = -1;
  const nextDelay = (): number => {
    if (delayedAfterDial === dials && previousDelayMs !== undefined) return previousDelayMs;
    delayedAfterDial = dials;
    attempt += 1;
    const delay = options.reconnect({ attempt, previousDelayMs, elapsedMs, random: options.random }) ?? 120_000;
    previousDelayMs = delay;
    elapsedMs += delay;
    return delay;
  };
  const nc = await connect({
    // The client otherwise builds stack traces for every request and flush: a third of a busy consumer's CPU.
    noAsyncTraces: true,
    ...options.connectionOptions,
    servers: options.servers,
    name: options.connectionName,
    maxReconnectAttempts: -1,
    waitOnFirstConnect: true,
    reconnectDelayHandler: nextDelay,
    reconnectToServer: (pool, info) => {
      dials += 1;
      return options.connectionOptions.reconnectToServer?.(pool, info) ?? null;
    },
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'reconnect') {
        attempt = 0;
        previousDelayMs = undefined;
        elapsedMs = 0;
      }
    }
  })();
  return nc;
}

async function watchStatus(nc: NatsConnection, options: ResolvedJetStreamOptions, onReconnect: ReconnectListener): Promise<void> {
  const logger = options.logger;
  for await (const status of nc.status()) {
    if (status.type === 'disconnect') logger?.warn({ server: status.server }, `jetstream: disconnected from ${status.server}; reconnecting`);
    else if (status.type === 'reconnect') {
      logger?.info({ server: status.server }, `jetstream: reconnected to ${status.server}`);
      onReconnect();
    } else if (status.type === 'error') logger?.warn({ error: String(status.error) }, `jetstream: connection error: ${String(status.error)}`);
  }
}
