import type { ConnectionRole } from './connection.js';

/**
 * The events a {@link RabbitMqTransport} emits, each with one arguments
 * object. Connection events name the connection they are about
 * (`connection`): the one that consumes and acks, or the one that publishes.
 */
export interface RabbitMqTransportEvents {
  /** A connection is open and its topology declared; `reconnect` is true after a loss. */
  connected: { connection: ConnectionRole; generation: number; reconnect: boolean };
  /** The connection dropped. On the consume connection, unsettled deliveries go back to their queues; the transport reconnects. */
  disconnected: { connection: ConnectionRole; generation: number; error: Error | undefined };
  /** A reconnection attempt is scheduled after `delayMs`. */
  reconnecting: { connection: ConnectionRole; attempt: number; delayMs: number; error: Error | undefined };
  /** The reconnect backoff gave up; every operation on that connection now fails with `error`. */
  failed: { connection: ConnectionRole; error: Error };
  /** The broker blocked publishing (`connection.blocked`, a resource alarm); publishes wait. */
  blocked: { connection: ConnectionRole; reason: string };
  /** The broker lifted the block; waiting publishes go out. */
  unblocked: { connection: ConnectionRole };
  /**
   * A retry or error-queue copy was confirmed but the original could not be
   * acked because its channel had closed: the broker redelivers the
   * original, so the message now exists twice (never zero times).
   */
  duplicateWindow: { id: string; queue: string; kind: 'retry' | 'deadLetter' | 'reschedule' };
  /** Something an operator should look at, such as a delivery limit below the retry policy's needs. */
  warning: { message: string; queue?: string };
}

/** Counters kept by the transport since it was created. */
export interface RabbitMqStats {
  /** Copies confirmed whose original could not be acked: each is one duplicate message. */
  duplicateWindow: number;
  /** Publishes that ran out of `confirmTimeoutMs`: a `ConfirmTimeoutError`, or a `PublishBlockedError` at the blocked gate. */
  confirmTimeouts: number;
  /** Connections lost after having been open. */
  connectionLosses: number;
  /** Successful reconnections. */
  reconnects: number;
  /** Delayed copies that arrived early by more than 1 ms and were scheduled again for the remainder. */
  rescheduledEarly: number;
  /** Settlements refused because the delivery's channel had closed (the broker redelivers). */
  staleSettlements: number;
  /** Received messages whose headers had entries dropped or truncated. */
  sanitizedHeaders: number;
}

/** A fresh set of counters. */
export function emptyStats(): RabbitMqStats {
  return {
    duplicateWindow: 0,
    confirmTimeouts: 0,
    connectionLosses: 0,
    reconnects: 0,
    rescheduledEarly: 0,
    staleSettlements: 0,
    sanitizedHeaders: 0,
  };
}

/** How the parts of the transport raise events. */
export type EmitEvent = <K extends keyof RabbitMqTransportEvents>(event: K, args: RabbitMqTransportEvents[K]) => void;
