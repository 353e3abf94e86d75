/**
 * The bare NSQ client's producer beside redeliver's: publishes messages
 * `from` to `to - 1` (body: the id `m-<i>`) with nsqjs, a window of them at
 * a time, and appends each id to an fsync'd log once nsqd answered OK. A
 * publish that fails is tried again every 500 ms for 60 s, then written to
 * the failure log.
 *
 * Usage: node --import tsx nsq-bare-producer.ts '<ProducerConfig as JSON>'
 */
import { publishAll } from './bare-lanes.js';
import type { ProducerConfig } from './producer.js';
import { bareWriter } from './nsq-bare-client.js';

const config = JSON.parse(process.argv[2] ?? '') as ProducerConfig;
if (config.transport.kind !== 'nsq') throw new Error('nsq-bare-producer: an nsq transport spec is needed');
const writer = bareWriter(config.transport.nsqd[0]!, config.transport.connectionName);

await publishAll(config, (id) => writer.publish(config.queue, id));
writer.close();
process.exit(0);
