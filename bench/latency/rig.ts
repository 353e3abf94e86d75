/**
 * What every side of `npm run bench -- latency` is: a sender and a consumer
 * on one broker, the consumer calling back at the start of each handler
 * with the stamp the sender wrote into the body.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { Transport } from '../../src/transport/types.js';

/** What the sender writes into each body, as JSON: the round, the index and two clocks of this process (`performance.now()`). */
export interface Stamp {
  /** The round the message belongs to. */
  readonly r: number;
  /** Its index in the round. */
  readonly i: number;
  /** When the timeline meant it to be sent. */
  readonly t: number;
  /** When the send was called. */
  readonly s: number;
  /** The filler that brings the body to a realistic size. */
  readonly payload: string;
}

/** Called at the start of each handler with the message's stamp and the handler's start (`performance.now()`). */
export type OnHandled = (stamp: Stamp, handledAt: number) => void;

/** One side, running: its consumer already started. */
export interface Rig {
  /** Sends one body (a JSON {@link Stamp}); resolves once the broker took it (as the side's client confirms a send). */
  send(body: Buffer, id: string): Promise<void>;
  /** Stops the consumer and closes the side's connections. */
  close(): Promise<void>;
}

/** Starts a side whose handler calls `onHandled`. */
export type RigFactory = (onHandled: OnHandled) => Promise<Rig>;

/** A body of `stamp`. */
export function stampBody(stamp: Stamp): Buffer {
  return Buffer.from(JSON.stringify(stamp));
}

/** The stamp in a body a bare client read. */
export function readStamp(body: Uint8Array): Stamp {
  return JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString()) as Stamp;
}

/** A transport of redeliver's, new and of its own, and the queue it is to use. */
export interface MadeTransport {
  readonly transport: Transport;
  readonly queue: string;
}

/**
 * redeliver's side on any transport: an Endpoint of concurrency `prefetch`
 * with the default codec (JSON) and recoverability, its handler noting the
 * stamp first; sends through `transport.send`.
 */
export async function redeliverRig({ transport, queue }: MadeTransport, prefetch: number, onHandled: OnHandled): Promise<Rig> {
  const endpoint = new Endpoint<Stamp>({
    name: 'bench-latency',
    queue,
    transport,
    concurrency: prefetch,
    handler: (stamp) => onHandled(stamp, performance.now()),
  });
  await endpoint.start();
  return {
    send: (body, id) => transport.send(queue, { id, body, headers: {} }),
    close: async () => {
      await endpoint.stop();
      await transport.close();
    },
  };
}

/**
 * The transport alone, without the Endpoint: `transport.consume` with
 * prefetch `prefetch`, a listener that notes the stamp (the body parsed as
 * the bare sides parse theirs) and acks; sends through `transport.send`.
 * Between the bare client and the Endpoint, it tells the transport's share
 * of a gap from the Endpoint's.
 */
export async function transportRig({ transport, queue }: MadeTransport, prefetch: number, onHandled: OnHandled): Promise<Rig> {
  const subscription = await transport.consume(
    queue,
    (delivery) => {
      onHandled(readStamp(delivery.body), performance.now());
      void delivery.ack();
    },
    { prefetch },
  );
  return {
    send: (body, id) => transport.send(queue, { id, body, headers: {} }),
    close: async () => {
      await subscription.close();
      await transport.close();
    },
  };
}

/** The two sides made of redeliver's transport: the Endpoint, and the transport alone. */
export type TransportSide = 'endpoint' | 'transport';

/** One transport of the benchmark: redeliver's transport, the bare client's side (none for SQLite), and the clean-up. */
export interface BrokerCase {
  /** The transport's name, as in the table. */
  readonly name: string;
  /** What the bare side is, as in the table. */
  readonly bareName: string | undefined;
  readonly bare: RigFactory | undefined;
  /** A new transport, and the queue `side` uses (each side a queue of its own). */
  transport(side: TransportSide): MadeTransport;
  /** Deletes every queue, topic, stream or key the case made. */
  cleanup(): Promise<void>;
}

/** What every case is given. */
export interface CaseSettings {
  /** A random token of the run's own, in every name the case makes. */
  readonly token: string;
  /** The endpoint's concurrency and the bare consumer's prefetch (max in flight, COUNT, max_messages). */
  readonly prefetch: number;
}
