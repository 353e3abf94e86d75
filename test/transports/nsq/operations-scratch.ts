/**
 * Shared pieces of the NSQ operations tests: the nsqd and nsqlookupd they
 * run against, a skip reason when nsqd is not up, and topic names with a run
 * token so each test owns what it creates.
 */
import { randomBytes } from 'node:crypto';
import { NsqdHttpApi } from '../../../src/transports/nsq/http-api.js';

export const NSQD_TCP = process.env['NSQD_TCP'] ?? '127.0.0.1:4150';
export const NSQD_HTTP = process.env['NSQD_HTTP'] ?? '127.0.0.1:4151';
export const NSQLOOKUPD_HTTP = process.env['NSQLOOKUPD_HTTP'] ?? '127.0.0.1:4161';

/** Why the NSQ tests cannot run here, or undefined when nsqd answers. */
export async function nsqSkipReason(): Promise<string | undefined> {
  try {
    await new NsqdHttpApi(NSQD_HTTP, { timeoutMs: 1_000 }).ping();
    return undefined;
  } catch (error) {
    return `nsqd is not reachable at ${NSQD_HTTP} (npm run brokers -- up nsq): ${(error as Error).message}`;
  }
}

/** A topic name of this run: `t-<token>-<label>`. */
export function scratchTopic(label: string): string {
  return `t-${randomBytes(4).toString('hex')}-${label}`;
}

/** Deletes the given topics (those already gone are fine). */
export async function deleteTopics(api: NsqdHttpApi, topics: Iterable<string>): Promise<void> {
  for (const topic of topics) await api.deleteTopic(topic);
}
