import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/**
 * What makes a test file run alone: a real broker (shared or of its own), a
 * process or browser it starts, or real time it waits on or measures.
 * Everything else (pure code, the fake clock, in-memory transports, SQLite
 * files of its own) runs in parallel with other such files.
 */
const RUNS_ALONE =
  /support\/(brokers|rabbit-node|redis-node|redis-cluster|nats-node|real-outage|tcp-proxy|rabbit-scratch|redis-scratch|jetstream-scratch|recording-rabbit)|rocketmq\/scratch|rocketmq-nodes|faults\/|cli\/support|nsqSkipReason|nsqNodeSkipReason|NsqNodes|NSQD_TCP|NSQD_HTTP|playwright|child_process|systemClock|setTimeout|sleep\(|Date\.now|performance\.now/;

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const alone = testFiles('test').filter((file) => RUNS_ALONE.test(readFileSync(file, 'utf8')));

const timeouts = { testTimeout: 30_000, hookTimeout: 30_000 };

export default defineConfig({
  test: {
    // Once around the whole run: removes what earlier runs left on the shared brokers, and names what this run's tests left.
    globalSetup: ['test/global-setup.ts'],
    projects: [
      {
        test: {
          ...timeouts,
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: alone,
          // First, two at a time: nothing here shares a broker or waits on real time.
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...timeouts,
          name: 'brokers',
          include: alone,
          // Then one at a time: broker tests share real queues on loopback, on this 2-core machine.
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
