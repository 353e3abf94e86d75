/**
 * The bare amqplib client's producer beside redeliver's: publishes messages
 * `from` to `to - 1` (body and message id: the id `m-<i>`, persistent) to
 * the bare work queue on a confirm channel, a window of them at a time, and
 * appends each id to an fsync'd log once the broker confirmed it. A publish
 * that fails (nacked, its channel closed, no confirm within 10 s) drops the
 * connection, and is tried again every 500 ms on a new one for 60 s, then
 * written to the failure log.
 *
 * Usage: node --import tsx rabbitmq-bare-producer.ts '<ProducerConfig as JSON>'
 */
import type { ChannelModel, ConfirmChannel } from 'amqplib';
import { publishAll } from './bare-lanes.js';
import { bareConnect, publishConfirmed } from './rabbitmq-bare-client.js';
import type { ProducerConfig } from './producer.js';

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
if (config.transport.kind !== 'rabbitmq') throw new Error('rabbitmq-bare-producer: a rabbitmq transport spec is needed');
const { url, connectionName } = config.transport;

interface Session {
  readonly model: ChannelModel;
  readonly channel: ConfirmChannel;
}
/** The connection the lanes publish on; a new one is opened once it is dropped. */
let current: Promise<Session> | undefined;

function session(): Promise<Session> {
  if (current) return current;
  const opening: Promise<Session> = (async () => {
    const model = await bareConnect(url, connectionName);
    const forget = () => {
      if (current === opening) current = undefined;
      void model.close().catch(() => undefined);
    };
    model.on('close', forget);
    const channel = await model.createConfirmChannel();
    channel.on('error', () => undefined);
    channel.on('close', forget);
    return { model, channel };
  })();
  current = opening;
  opening.catch(() => {
    if (current === opening) current = undefined;
  });
  return opening;
}

/** Drops `s` (if it is still the current connection), so the next publish opens a new one. */
function drop(s: Session | undefined): void {
  if (s && current) {
    void current.then((c) => {
      if (c === s) {
        current = undefined;
        void s.model.close().catch(() => undefined);
      }
    }, () => undefined);
  }
}

await publishAll(config, async (id) => {
  let s: Session | undefined;
  try {
    s = await session();
    await publishConfirmed(s.channel, config.queue, id);
  } catch (error) {
    drop(s);
    throw error;
  }
});
await current?.then((s) => s.model.close()).catch(() => undefined);
process.exit(0);
