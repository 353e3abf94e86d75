/**
 * Scratch space on the shared NATS server: a JetStream prefix of the test's
 * own (`test-<label>-<8 hex>`), and a cleanup that deletes every stream of
 * that prefix (their consumers go with them). Streams of other prefixes are
 * never touched.
 */
import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { JetStreamNames } from '../../src/transports/jetstream/names.js';
import { NATS_URL } from './brokers.js';

/** A fresh prefix labelled `label`. */
export function jetStreamPrefix(label: string): string {
  return `test-${label}-${randomUUID().slice(0, 8)}`;
}

/**
 * Deletes every stream named `<prefix>_…` on the server at `url` (default
 * {@link NATS_URL}): a prefix's queues, delay stream and clock stream, and
 * no other prefix's (see `JetStreamNames.ownsStream`). Resolves how many
 * streams were deleted.
 */
export async function deleteJetStreamPrefix(prefix: string, url: string = NATS_URL): Promise<number> {
  const names = new JetStreamNames(prefix);
  const nc = await connect({ servers: url, reconnect: false, name: `redeliver-cleanup-${prefix}` });
  try {
    const jsm = await jetstreamManager(nc);
    const doomed: string[] = [];
    for await (const name of jsm.streams.names()) if (names.ownsStream(name)) doomed.push(name);
    for (const name of doomed) await jsm.streams.delete(name);
    return doomed.length;
  } finally {
    await nc.close();
  }
}
