/**
 * What the bare JetStream client's worker, producer and fault adapter share:
 * the names of a bare queue's stream, subject and consumer, and a
 * connection that knows every node and keeps reconnecting.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';

/** The durable pull consumer the bare worker reads through. */
export const BARE_CONSUMER = 'bare';

/** The stream of bare queue `queue` (a stream name: no dots) and the one subject it holds. */
export function bareNames(queue: string): { readonly stream: string; readonly subject: string } {
  return { stream: queue, subject: `bare.${queue}` };
}

/** A connection to `servers`, ignoring servers the cluster announces, reconnecting every 250 ms without end. */
export function bareConnect(servers: readonly string[], name: string): Promise<NatsConnection> {
  return connect({ servers: [...servers], name, ignoreClusterUpdates: true, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
}
