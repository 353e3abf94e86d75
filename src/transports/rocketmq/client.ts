/**
 * The Node client's producer and simple consumers, built the way the
 * transport needs them:
 *
 * - the producer makes one attempt per send (`maxAttempts: 1`): the client
 *   reads the proxy's throttling backoff in whole seconds and waits that
 *   number of milliseconds, so its own retries of a throttled send come at
 *   once; redeliver's `Producer` owns send retry and the throttling backoff;
 * - the client's log lines (printf-style arguments) go to the transport's
 *   logger at debug level: the transport reports what matters itself.
 */
import { Producer, SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import type { Logger } from '../../logger.js';
import type { ResolvedRocketMqOptions } from './options.js';

export type { MessageView };

/** The client's logger interface, fed to `logger.debug`. */
function clientLogger(logger: Logger | undefined) {
  const write = (level: string) => (...args: unknown[]) => logger?.debug?.({ client: 'rocketmq-client-nodejs', level, args: args.slice(1).map(String) }, String(args[0]));
  return { info: write('info'), warn: write('warn'), error: write('error'), debug: write('debug') };
}

/** A started producer that makes one attempt per send. */
export async function startProducer(o: ResolvedRocketMqOptions): Promise<Producer> {
  const producer = new Producer({
    endpoints: o.endpoints,
    namespace: '',
    requestTimeout: o.requestTimeoutMs,
    logger: clientLogger(o.logger),
    maxAttempts: 1,
  });
  await producer.startup();
  return producer;
}

/** A started simple consumer of `topic` in `group`, every tag. */
export async function startConsumer(o: ResolvedRocketMqOptions, topic: string, group: string): Promise<SimpleConsumer> {
  const consumer = new SimpleConsumer({
    endpoints: o.endpoints,
    namespace: '',
    requestTimeout: o.requestTimeoutMs,
    logger: clientLogger(o.logger),
    consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    awaitDuration: o.pollWaitMs,
    // The subscription retries failed receives itself, with its backoff.
    maxRetryAttempts: 1,
  });
  await consumer.startup();
  return consumer;
}
