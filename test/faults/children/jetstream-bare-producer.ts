/**
 * The bare JetStream client's producer beside redeliver's: publishes
 * messages `from` to `to - 1` (body: the id `m-<i>`, `Nats-Msg-Id` the id)
 * with nats.js, a window of them at a time, and appends each id to an
 * fsync'd log once the stream acknowledged it. A publish that fails is tried
 * again every 500 ms for 60 s (the same id, so the stream stores it once),
 * then written to the failure log.
 *
 * Usage: node --import tsx jetstream-bare-producer.ts '<ProducerConfig as JSON>'
 */
import { jetstream } from '@nats-io/jetstream';
import { publishAll } from './bare-lanes.js';
import { bareConnect, bareNames } from './jetstream-bare-client.js';
import type { ProducerConfig } from './producer.js';

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
if (config.transport.kind !== 'jetstream') throw new Error('jetstream-bare-producer: a jetstream transport spec is needed');
const nc = await bareConnect(config.transport.servers, config.transport.connectionName);
const js = jetstream(nc, { timeout: 5_000 });
const { subject } = bareNames(config.queue);

await publishAll(config, async (id) => {
  await js.publish(subject, id, { msgID: id });
});
await nc.close();
process.exit(0);
