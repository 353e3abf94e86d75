import { InvalidArgumentError, Option, type Command } from 'commander';
import { DEMO_FILE, runDemo } from '../demo.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('send a few thousand messages through an endpoint on a SQLite file (or Redis, NATS JetStream, NSQ or RocketMQ), with an outage and some poison messages')
    .option('-n, --messages <count>', 'messages to send', wholeNumber, 3000)
    .option('--delay-scale <factor>', 'scale of the delayed-retry delays (10, 20, 30 s)', positive, 0.05)
    .option('--file <path>', `SQLite file to create and keep; must not exist yet (default: ${DEMO_FILE} in the current folder, replaced if it exists)`)
    .addOption(
      new Option(
        '--transport <name>',
        'where the queues live: sqlite, redis (keys under the prefix redeliver-demo), jetstream (streams under the prefix redeliver-demo), nsq (topics orders and error, consumed through the channel redeliver-demo) or rocketmq (topics redeliver-demo-orders and redeliver-demo-error, group redeliver-demo), replaced on each run',
      )
        .choices(['sqlite', 'redis', 'jetstream', 'nsq', 'rocketmq'])
        .default('sqlite'),
    )
    .option(
      '--url <url>',
      'the server, with --transport redis (default: redis://127.0.0.1:6379), jetstream (default: nats://127.0.0.1:4222), nsq (default: nsq://127.0.0.1:4150) or rocketmq (the gRPC proxy, default: rocketmq://127.0.0.1:8081; name server from $REDELIVER_ROCKETMQ_NAME_SERVER, else the proxy host on 9876)',
    )
    .action(async (opts: { messages: number; delayScale: number; file?: string; transport: 'sqlite' | 'redis' | 'jetstream' | 'nsq' | 'rocketmq'; url?: string }) => {
      await runDemo({ ...opts, out: process.stdout });
    });
}

/** Parses a whole number of at least 1. */
export function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number');
  return n;
}
