/**
 * What one nsqd refuses, read once from its HTTP API (`GET /config/<option>`):
 * the transport checks a message against them before sending, since nsqd
 * answers some violations by closing the connection (a DPUB over
 * `--max-req-timeout`) and others by refusing the message.
 */
import type { NsqdHttpApi } from './http-api.js';

/** One nsqd's limits. */
export interface NodeLimits {
  /** `--max-msg-size`: the most bytes one message body (the envelope included) may take. */
  readonly maxMessageBytes: number;
  /** `--max-req-timeout`: the longest DPUB or REQ delay, in ms. */
  readonly maxDelayMs: number;
  /** `--max-msg-timeout`: the longest lease (IDENTIFY `msg_timeout`, and TOUCH in all), in ms. */
  readonly maxLeaseMs: number;
  /** `--max-rdy-count`: the highest RDY one connection may ask for. */
  readonly maxRdyCount: number;
}

/** Reads `api`'s limits. Rejects with the HTTP API's error when nsqd cannot be asked. */
export async function readNodeLimits(api: NsqdHttpApi): Promise<NodeLimits> {
  const [maxMessageBytes, maxDelayMs, maxLeaseMs, maxRdyCount] = await Promise.all([
    api.numberOption('max_msg_size'),
    api.durationMs('max_req_timeout'),
    api.durationMs('max_msg_timeout'),
    api.numberOption('max_rdy_count'),
  ]);
  return { maxMessageBytes, maxDelayMs, maxLeaseMs, maxRdyCount };
}
