import type { Command } from 'commander';
import { registerSimulateContention } from './simulate-contention.js';
import { registerSimulateOutage } from './simulate-outage.js';

/** `redeliver simulate`: the simulations, each a subcommand. */
export function registerSimulate(program: Command): void {
  const simulate = program
    .command('simulate')
    .description('run retry strategies through a discrete-event simulation: simulated time, a seeded random source, the library\'s own backoff code');
  registerSimulateContention(simulate);
  registerSimulateOutage(simulate);
}
