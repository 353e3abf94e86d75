/**
 * What the NSQ tests share: the shared nsqd's addresses (4150/4151, or
 * NSQD_TCP/NSQD_HTTP), whether it answers, a reader of one channel's
 * clients off its `/stats`, and cleanup of the topics a test made.
 */
import { randomUUID } from 'node:crypto';
import { NsqdHttpApi, type NsqClientStats } from '../../../src/transports/nsq/http-api.js';

export const NSQD_TCP = process.env['NSQD_TCP'] ?? '127.0.0.1:4150';
export const NSQD_HTTP = process.env['NSQD_HTTP'] ?? '127.0.0.1:4151';

export function nsqdHttp(address = NSQD_HTTP): NsqdHttpApi {
  return new NsqdHttpApi(address);
}

/** Why the shared nsqd tests cannot run, or undefined when they can. Throws under CI=true. */
export async function nsqSkipReason(): Promise<string | undefined> {
  try {
    await nsqdHttp().ping();
    return undefined;
  } catch (error) {
    const reason = `nsqd is not reachable at ${NSQD_HTTP} (${String(error)})`;
    if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
    console.warn(`\n!!! SKIPPING NSQ tests: ${reason}. Start it with npm run brokers -- up nsq. !!!\n`);
    return reason;
  }
}

/** A topic name unique to this run. */
export function topicName(label: string): string {
  return `nsqt-${label}-${randomUUID().slice(0, 8)}`;
}

/** Deletes every topic on the node whose name `pick` accepts. */
export async function deleteNsqTopics(api: NsqdHttpApi, pick: (name: string) => boolean): Promise<void> {
  const stats = await api.stats();
  await Promise.all(stats.topics.filter((t) => pick(t.topic_name)).map((t) => api.deleteTopic(t.topic_name)));
}

/** The clients of `topic`/`channel` on the node, as its `/stats` lists them. */
export async function channelClients(api: NsqdHttpApi, topic: string, channel = 'redeliver'): Promise<NsqClientStats[]> {
  return (await api.channelStats(topic, channel))?.clients ?? [];
}

/** Whether nsqd holds nothing on `topic`/`channel`: nothing ready, in flight or deferred (every message there finished). */
export async function channelEmpty(api: NsqdHttpApi, topic: string, channel = 'redeliver'): Promise<boolean> {
  const c = await api.channelStats(topic, channel);
  return c !== undefined && c.depth + c.in_flight_count + c.deferred_count === 0;
}

/** Polls `probe` every 20 ms until it returns true, failing after `timeoutMs` with `what`. */
export async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
