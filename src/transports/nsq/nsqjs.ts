/**
 * The parts of nsqjs the transport uses: its single-use connections to one
 * nsqd (`NSQDConnection` to consume, `WriterNSQDConnection` to publish) and
 * the message they hand out. `@types/nsqjs` describes only the `Reader` and
 * `Writer`, whose reconnection, RDY and backoff the transport does not use,
 * so the connection classes are typed here.
 */
import type { EventEmitter } from 'node:events';
import nsqjs from 'nsqjs';

/** Options of an nsqjs connection, as its `ConnectionConfig` takes them. */
export interface NsqjsConnectionOptions {
  clientId?: string;
  /** Seconds. */
  heartbeatInterval?: number;
  /** Milliseconds: IDENTIFY `msg_timeout`. */
  messageTimeout?: number | null;
}

/** A message as nsqjs hands it out. */
export interface NsqjsMessage {
  readonly id: string;
  readonly attempts: number;
  readonly timestamp: number;
  readonly body: Buffer;
  hasResponded: boolean;
  finish(): void;
  requeue(delayMs: number, backoff: boolean): void;
  touch(): void;
}

/** One connection to one nsqd; once closed it stays closed. */
export interface NsqjsConnection extends EventEmitter {
  /** From IDENTIFY's answer, once ready. */
  readonly maxRdyCount: number;
  readonly msgTimeout: number;
  readonly maxMsgTimeout: number;
  connect(): void;
  setRdy(count: number): void;
  close(): void;
  destroy(): void;
  /** The socket, once connecting. */
  readonly conn: { destroyed: boolean; destroy(): void; cork(): void; uncork(): void; write(data: Uint8Array): boolean } | null | undefined;
}

export interface NsqjsWriterConnection extends NsqjsConnection {
  produceMessages(topic: string, messages: Buffer[], delayMs: number | undefined, callback: (error?: Error | null) => void): void;
}

interface NsqjsModule {
  NSQDConnection: new (host: string, port: number, topic: string, channel: string, options: NsqjsConnectionOptions) => NsqjsConnection;
  WriterNSQDConnection: new (host: string, port: number, options: NsqjsConnectionOptions) => NsqjsWriterConnection;
}

const lib = nsqjs as unknown as NsqjsModule;

/** The events nsqjs connections emit. */
export const EVENT = { ready: 'ready', message: 'message', closed: 'closed', error: 'error', connectionError: 'connection_error' } as const;

/** A consuming connection to `host:port` for `topic` through `channel`, not connected yet. */
export function readerConnection(host: string, port: number, topic: string, channel: string, options: NsqjsConnectionOptions): NsqjsConnection {
  return new lib.NSQDConnection(host, port, topic, channel, options);
}

/** A publishing connection to `host:port`, not connected yet. */
export function writerConnection(host: string, port: number, options: NsqjsConnectionOptions): NsqjsWriterConnection {
  return new lib.WriterNSQDConnection(host, port, options);
}
