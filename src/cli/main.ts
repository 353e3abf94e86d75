#!/usr/bin/env node
import { Command } from 'commander';
import { registerDemo } from './commands/demo.js';
import { UsageError } from './open-transport.js';

const program = new Command()
  .name('redeliver')
  .description('Recoverability for message handlers: retries, delayed retries and error queues on SQLite, RabbitMQ and more.');

registerDemo(program);

program.parseAsync(process.argv).catch((error: unknown) => {
  console.error(`redeliver: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = error instanceof UsageError ? 2 : 1;
});
