/**
 * Fixtures of the NSQ operations tests (the transport's, the CLI's and the
 * dashboard's): the nsqd and nsqlookupd they run against, a skip reason
 * when nsqd is not up, topic names with a run token so each test owns what
 * it creates, plain messages published in bulk, a wait for a channel's
 * depth, and a reader that dies holding messages.
 */
import { randomBytes } from 'node:crypto';
import { Socket } from 'node:net';
import { NsqdHttpApi } from '../../../src/transports/nsq/http-api.js';
import { until } from '../../support/own-servers.js';

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

/** Publishes `bodies` (none may contain a newline) to `topic` in one `POST /mpub`. */
export async function publishMany(api: NsqdHttpApi, topic: string, bodies: readonly string[]): Promise<void> {
  const answer = await fetch(`http://${api.address}/mpub?topic=${encodeURIComponent(topic)}`, { method: 'POST', body: bodies.join('\n') });
  if (!answer.ok) throw new Error(`POST /mpub answered ${answer.status}: ${await answer.text()}`);
}

/**
 * Waits until `topic`/`channel` holds `depth` ready messages (and, when
 * given, `deferred` deferred ones). nsqd answers a publish once the topic
 * has the message and copies it to each channel in its own goroutine
 * afterwards, so counts read right after a publish may not include it yet.
 * Throws with the counts last seen after `timeoutMs`.
 */
export async function untilDepth(api: NsqdHttpApi, topic: string, channel: string, depth: number, deferred?: number, timeoutMs = 5_000): Promise<void> {
  let seen: Awaited<ReturnType<NsqdHttpApi['channelStats']>>;
  const wanted = `depth ${depth}${deferred === undefined ? '' : `, deferred ${deferred}`}`;
  const holds = async () => {
    seen = await api.channelStats(topic, channel);
    return seen?.depth === depth && (deferred === undefined || seen.deferred_count === deferred);
  };
  await until(`${topic}/${channel} to hold ${wanted}`, timeoutMs, holds, 20).catch((error: Error) => {
    throw new Error(`${error.message}; it holds ${seen ? `depth ${seen.depth}, deferred ${seen.deferred_count}` : 'no channel'}`);
  });
}

/**
 * A reader of `topic`/`channel` that takes `count` messages in flight on a
 * lease of `leaseMs` and then drops its connection without settling them,
 * as a process killed -9 does: nsqd gives them back once the lease runs out.
 */
export async function dieHolding(tcp: string, topic: string, channel: string, count: number, leaseMs = 1_000): Promise<void> {
  const [host, port] = [tcp.slice(0, tcp.lastIndexOf(':')), Number(tcp.slice(tcp.lastIndexOf(':') + 1))];
  const socket = new Socket();
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.connect(port, host, resolve);
  });
  let received = 0;
  let buffer = Buffer.alloc(0);
  const held = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dieHolding: ${received} of ${count} messages arrived`)), 10_000);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 8 && buffer.length >= 4 + buffer.readUInt32BE(0)) {
        if (buffer.readUInt32BE(4) === 2) received++;
        buffer = buffer.subarray(4 + buffer.readUInt32BE(0));
      }
      if (received >= count) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const identify = Buffer.from(JSON.stringify({ client_id: 'dies-holding', msg_timeout: leaseMs }));
  const size = Buffer.alloc(4);
  size.writeUInt32BE(identify.length);
  socket.write(Buffer.concat([Buffer.from('  V2IDENTIFY\n'), size, identify, Buffer.from(`SUB ${topic} ${channel}\nRDY ${count}\n`)]));
  try {
    await held;
  } finally {
    socket.destroy();
  }
}
