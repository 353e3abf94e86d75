import { describe, expect, it } from 'vitest';
import { atLeastByChance, holdsFailure, openAccountedFor, rowFailure, rowStall, type ScenarioResult } from './run.js';

const passing: ScenarioResult = { name: 'worker-kill', transport: 'sqlite', messages: 100, lost: 0, duplicates: 2, recoverySeconds: 3.1, pending: 0 };

describe('a fault row fails', () => {
  it('passes a row that lost nothing, held nothing twice and drained', () => {
    expect(rowFailure(passing)).toBeUndefined();
  });

  it('when redeliver lost more than the bare client beside it', () => {
    expect(rowFailure({ ...passing, lost: 3 })).toBe('lost 3');
    expect(rowFailure({ ...passing, lost: 3, bareLost: 3 })).toBeUndefined();
    expect(rowFailure({ ...passing, lost: 4, bareLost: 3 })).toBe('lost 4');
  });

  it('not when a failover without waitReplicas lost what replication had not copied', () => {
    expect(rowFailure({ ...passing, lost: 12, waitReplicas: 0 })).toBeUndefined();
    expect(rowFailure({ ...passing, lost: 12, waitReplicas: 1 })).toBe('lost 12');
  });

  it('when a message was in two handlers at once', () => {
    expect(rowFailure({ ...passing, overlaps: 1 })).toBe('two holders 1');
  });

  it('not on its own when a bare client recorded its holds beside it: the run compares the two', () => {
    expect(rowFailure({ ...passing, overlaps: 1, bareOverlaps: 0 })).toBeUndefined();
  });

  it('when the scenario stopped before its fault ran through', () => {
    expect(rowFailure({ ...passing, stoppedEarly: 'worker-1 exited at start with code 1' })).toBe('stopped early: worker-1 exited at start with code 1');
  });

  it('not when it never drained with messages left pending: that is a stall, reported apart', () => {
    const stalled = { ...passing, recoverySeconds: null, pending: 100 };
    expect(rowFailure(stalled)).toBeUndefined();
    expect(rowStall(stalled)).toBe('100 messages left pending, never handled');
    expect(rowStall({ ...passing, recoverySeconds: null, pending: 0, lost: 5, bareLost: 5 })).toBeUndefined();
    expect(rowStall({ ...passing, pending: 8 })).toBeUndefined();
  });

  it('never when the scenario was skipped', () => {
    expect(rowFailure({ ...passing, recoverySeconds: null, pending: 3, skipped: 'needs root' })).toBeUndefined();
    expect(rowStall({ ...passing, recoverySeconds: null, pending: 3, skipped: 'needs root' })).toBeUndefined();
  });
});

describe("a cluster's rows fail together", () => {
  const paired = (overlaps: number, bareOverlaps: number): ScenarioResult => ({ ...passing, transport: 'jetstream-3-netns', overlaps, bareOverlaps });

  it('when redeliver held messages twice at once more often over the run than the bare client beside it, beyond chance', () => {
    expect(holdsFailure([paired(1, 0), paired(0, 0), paired(1, 0), paired(0, 6)])).toBeUndefined();
    expect(holdsFailure([paired(2, 0), paired(2, 2)])).toBeUndefined();
    expect(holdsFailure([paired(0, 0), paired(0, 0)])).toBeUndefined();
    expect(holdsFailure([paired(6, 0)])).toBeUndefined();
    expect(holdsFailure([paired(4, 0), paired(3, 0)])).toBe('two holders 7 over 2 rows, the bare client 0 (as likely by chance: 0.78 %)');
    expect(holdsFailure([paired(30, 10)])).toMatch(/^two holders 30 over 1 rows, the bare client 10 \(as likely by chance: 0\.1\d %\)$/);
    expect(holdsFailure([paired(23, 82)])).toBeUndefined();
  });

  it('takes chance as a fair coin per hold: the tail of a binomial, exact for small counts and finite for large ones', () => {
    expect(atLeastByChance(0, 5)).toBeCloseTo(1, 12);
    expect(atLeastByChance(6, 6)).toBeCloseTo(1 / 64, 12);
    expect(atLeastByChance(4, 6)).toBeCloseTo(22 / 64, 12);
    expect(atLeastByChance(1500, 2000)).toBeGreaterThan(0);
    expect(atLeastByChance(1500, 2000)).toBeLessThan(1e-100);
    expect(atLeastByChance(1000, 2000)).toBeCloseTo(0.5 + 0.5 * 0.0178, 3);
  });

  it('counts only the rows a bare client recorded holds beside, and not skipped ones', () => {
    expect(holdsFailure([{ ...passing, overlaps: 5 }, paired(1, 1)])).toBeUndefined();
    expect(holdsFailure([{ ...paired(4, 0), skipped: 'needs root' }, paired(1, 1)])).toBeUndefined();
    expect(holdsFailure([{ ...passing, overlaps: 2 }])).toBeUndefined();
  });
});

describe('the drain counts the open ids as accounted for', () => {
  it('when none is open, or no more are open than the error queue holds and the parked copies', () => {
    expect(openAccountedFor([], 0, 0)).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 2, 0)).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 1, 1)).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 1, 0)).toBe(false);
  });

  it('given the error queue ids, only when each open id is among them, but the parked ones', () => {
    expect(openAccountedFor(['m-1', 'm-2'], 2, 0, new Set(['m-1', 'm-2']))).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 2, 1, new Set(['m-1']))).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 2, 0, new Set(['m-1']))).toBe(false);
  });

  it('not when an entry the error queue holds twice stands for a message still on its way', () => {
    // m-1 dead-lettered twice (its original was given out again after the first copy), m-2 a delayed copy not yet due.
    expect(openAccountedFor(['m-1', 'm-2'], 2, 0)).toBe(true);
    expect(openAccountedFor(['m-1', 'm-2'], 2, 0, new Set(['m-1']))).toBe(false);
  });
});
