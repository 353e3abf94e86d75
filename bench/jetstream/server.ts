/**
 * The NATS server the JetStream benchmarks run on: a connection with its
 * JetStream clients, a work stream as the transport lays one out, loading
 * it, and deleting every stream of the benchmark's prefix afterwards (the
 * server is shared, so each run writes only under a prefix of its own).
 */
import { connect, nanos, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';

/** Publishes in flight at once while a stream is loaded. */
const PUBLISH_CHUNK = 1_000;

/** A connection and its JetStream clients. */
export interface NatsClients {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
}

/**
 * Connects to `servers` as `name`. `noAsyncTraces` turns off the client's
 * capture of the caller's stack for each request (an `Error` made up front
 * for every request, in case it fails).
 */
export async function openClients(servers: string, name: string, noAsyncTraces = false): Promise<NatsClients> {
  const nc = await connect({ servers, name, noAsyncTraces });
  return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
}

/** Runs `fn` with clients of its own, closing the connection afterwards. */
export async function withClients<T>(servers: string, name: string, fn: (clients: NatsClients) => Promise<T>, noAsyncTraces = false): Promise<T> {
  const clients = await openClients(servers, name, noAsyncTraces);
  try {
    return await fn(clients);
  } finally {
    await clients.nc.close();
  }
}

/**
 * A stream holding one subject as the transport makes a work queue: work
 * queue retention, discard new, file storage, a two-minute duplicate window.
 */
export async function addWorkStream(jsm: JetStreamManager, name: string, subject: string): Promise<void> {
  await jsm.streams.add({
    name,
    subjects: [subject],
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    storage: StorageType.File,
    num_replicas: 1,
    duplicate_window: nanos(120_000),
  });
}

/** A durable pull consumer with explicit acks, at most `maxAckPending` unacknowledged (-1: no limit). */
export async function addPullConsumer(jsm: JetStreamManager, stream: string, durable: string, maxAckPending: number): Promise<void> {
  await jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(30_000),
    max_deliver: -1,
    max_ack_pending: maxAckPending,
  });
}

/**
 * Publishes `count` messages to `subject`, message `i` with the
 * `Nats-Msg-Id`, body and headers `message(i)` gives, and checks the stream then
 * holds `expected` messages.
 */
export async function publishAll(
  clients: NatsClients,
  stream: string,
  subject: string,
  count: number,
  message: (i: number) => { readonly id: string; readonly body: Uint8Array; readonly headers?: MsgHdrs },
  expected = count,
): Promise<void> {
  for (let i = 0; i < count; i += PUBLISH_CHUNK) {
    const acks: Promise<unknown>[] = [];
    for (let j = i; j < Math.min(count, i + PUBLISH_CHUNK); j++) {
      const { id, body, headers } = message(j);
      acks.push(clients.js.publish(subject, body, headers === undefined ? { msgID: id } : { msgID: id, headers }));
    }
    await Promise.all(acks);
  }
  const { state } = await clients.jsm.streams.info(stream);
  if (state.messages !== expected) throw new Error(`stream ${stream} holds ${state.messages} messages, expected ${expected}`);
}

/** Deletes every stream whose name starts with `<prefix>_` and returns how many there were. */
export async function deleteStreams(jsm: JetStreamManager, prefix: string): Promise<number> {
  const names: string[] = [];
  for await (const name of jsm.streams.names()) if (name.startsWith(`${prefix}_`)) names.push(name);
  for (const name of names) await jsm.streams.delete(name);
  return names.length;
}

/** Throws when a stream of `prefix` is left (deleting it first). */
export async function assertNoStreams(servers: string, prefix: string): Promise<void> {
  const left = await withClients(servers, 'redeliver-bench-cleanup', ({ jsm }) => deleteStreams(jsm, prefix));
  if (left > 0) throw new Error(`${left} streams of ${prefix} were left behind (now deleted)`);
}
