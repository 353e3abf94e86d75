import type { Command } from 'commander';
import type { QueueDepth } from '../../transport/inspection.js';
import { oneLine, table } from '../format.js';
import { ioOf } from '../program.js';
import { redactCredentials } from '../../util/redact.js';
import { resolveTarget, UsageError } from '../open-transport.js';
import { OPTIONAL_TARGET_HELP, queueName, withTransport, write } from '../session.js';
import { STORE_HELP, storeFile } from '../store-session.js';
import { readStoreStats, storeStatsLines } from './stats-store.js';
import { TARGET_ENV } from '../open-transport.js';

interface StatsOptions {
  store?: string;
  /** Default: every queue the transport knows. */
  queue?: string[];
  json?: boolean;
}

const KIND_ORDER: Record<QueueDepth['kind'], number> = { work: 0, retry: 1, error: 2 };

/** `redeliver stats [target]`: how many messages wait in each queue. */
export function registerStats(program: Command): void {
  program
    .command('stats')
    .description('show how many messages each queue holds: ready, waiting for a delayed retry, and in flight')
    .argument('[target]', OPTIONAL_TARGET_HELP)
    .option('--queue <names...>', 'only these queues (default: every queue the transport knows)', (value: string, previous: string[] | undefined) => [
      ...(previous ?? []),
      queueName(value),
    ])
    .option('--json', 'print JSON for scripts')
    .option('--store <file>', `${STORE_HELP}: add its entries by error queue and status`, storeFile)
    .action(async (target: string | undefined, opts: StatsOptions, command: Command) => {
      const store = await readStoreStats(command, opts);
      const io = ioOf(command);
      if (store && target === undefined && !(io.env ?? process.env)[TARGET_ENV]) {
        // No broker named: the store alone.
        await write(io.stdout, opts.json ? `${JSON.stringify({ store }, null, 2)}\n` : `${storeStatsLines(store).join('\n')}\n`);
        return;
      }
      const storeText = store ? `\n${storeStatsLines(store).join('\n')}\n` : '';
      await withTransport(command, target, async (transport, io) => {
        if (!transport.inspection) throw new UsageError(`the ${transport.name} transport cannot read queue depths yet (no queue inspection)`);
        const depths = await transport.inspection.queueDepths(opts.queue);
        // The operator's order when queues are named, otherwise work, retry and error queues, each by name.
        const sorted = opts.queue ? depths : [...depths].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.queue.localeCompare(b.queue));
        if (opts.json) {
          await write(io.stdout, `${JSON.stringify({ queues: sorted, ...(store ? { store } : {}) }, null, 2)}\n`);
          return;
        }
        if (sorted.length === 0) {
          await write(io.stdout, `no queues in ${oneLine(redactCredentials(resolveTarget(target, io.env ?? process.env)))}\n${storeText}`);
          return;
        }
        const rows = sorted.map((d) => [d.queue, d.kind, String(d.ready), String(d.delayed), String(d.inFlight)]);
        const lines = table(
          [{ title: 'QUEUE', max: 60 }, { title: 'KIND' }, { title: 'READY', align: 'right' }, { title: 'DELAYED', align: 'right' }, { title: 'IN FLIGHT', align: 'right' }],
          rows,
        );
        await write(io.stdout, `${lines.join('\n')}\n${storeText}`);
      });
    });
}
