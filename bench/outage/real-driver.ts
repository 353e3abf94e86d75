import type { Clock } from '../../src/time/clock.js';
import type { Driver } from '../../src/simulation/outage.js';

/** Drives an outage run in real time: polls `done` every 50 ms. */
export function realDriver(clock: Clock): Driver {
  return {
    clock,
    async runUntil(done, limitMs) {
      const end = clock.now() + limitMs;
      while (!done()) {
        if (clock.now() > end) return false;
        await new Promise((r) => setTimeout(r, 50));
      }
      return true;
    },
  };
}
