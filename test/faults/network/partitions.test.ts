import { describe, expect, it } from 'vitest';
import { PARTITION_KINDS, partitionSchedule } from './partitions.js';

describe('partitionSchedule', () => {
  it('draws the same schedule from the same seed, and another from another seed', () => {
    expect(partitionSchedule(7, 6)).toEqual(partitionSchedule(7, 6));
    expect(partitionSchedule(7, 6)).not.toEqual(partitionSchedule(8, 6));
  });

  it('runs every kind once before any repeats, with cuts of 3 to 6 s and 1 to 3 s healed between', () => {
    const steps = partitionSchedule(3, PARTITION_KINDS.length + 1);
    expect(new Set(steps.slice(0, PARTITION_KINDS.length).map((s) => s.kind)).size).toBe(PARTITION_KINDS.length);
    expect(steps[PARTITION_KINDS.length]!.kind).toBe(steps[0]!.kind);
    for (const step of steps) {
      expect(step.cutMs).toBeGreaterThanOrEqual(3_000);
      expect(step.cutMs).toBeLessThanOrEqual(6_000);
      expect(step.healedMs).toBeGreaterThanOrEqual(1_000);
      expect(step.healedMs).toBeLessThanOrEqual(3_000);
    }
  });
});
