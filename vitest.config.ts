import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Broker tests share real queues on loopback; files run one at a time on this 2-core machine.
    fileParallelism: false,
    // Removes what earlier runs left on the shared brokers, and names what this run's tests left.
    globalSetup: ['test/global-setup.ts'],
  },
});
