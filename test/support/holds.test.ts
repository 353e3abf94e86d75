import { describe, expect, it } from 'vitest';
import { describeOverlaps, findOverlaps, HoldLog, type Hold } from './holds.js';

const hold = (messageId: string, holder: string, startedAt: number, endedAt: number, leaseEndsAt = Infinity): Hold => ({
  messageId,
  holder,
  startedAt,
  endedAt,
  leaseEndsAt,
});

describe('findOverlaps', () => {
  it('finds a message held by two holders at once, and says who and when', () => {
    const overlaps = findOverlaps([hold('m-1', 'a', 0, 100), hold('m-1', 'b', 50, 120)]);
    expect(overlaps).toHaveLength(1);
    expect(overlaps[0]!.earlier.holder).toBe('a');
    expect(overlaps[0]!.later.holder).toBe('b');
    expect(describeOverlaps(overlaps)).toMatch(/^m-1: a 0\.0\.\.100\.0 .* overlapped by b 50\.0\.\.120\.0/);
  });

  it('finds the overlap whatever order the holds were recorded in, and one inside another', () => {
    expect(findOverlaps([hold('m', 'b', 10, 20), hold('m', 'a', 0, 100)])).toHaveLength(1);
  });

  it('sees no overlap between holds one after another, touching or not, nor between different messages', () => {
    expect(findOverlaps([hold('m', 'a', 0, 10), hold('m', 'b', 10, 20), hold('m', 'a', 30, 40), hold('n', 'b', 5, 35)])).toEqual([]);
  });

  it('allows a later holder once the earlier lease ran out, not before', () => {
    expect(findOverlaps([hold('m', 'a', 0, 100, 30), hold('m', 'b', 40, 60)])).toEqual([]);
    expect(findOverlaps([hold('m', 'a', 0, 100, 30), hold('m', 'b', 20, 60)])).toHaveLength(1);
  });

  it('allows a later holder after a moment every lease was lost (a cut connection), only for holds running then', () => {
    const holds = [hold('m', 'a', 0, 100), hold('m', 'b', 60, 80), hold('n', 'a', 70, 100), hold('n', 'b', 80, 90)];
    const overlaps = findOverlaps(holds, { leasesLostAt: [50] });
    expect(overlaps.map((o) => o.earlier.messageId)).toEqual(['n']);
  });

  it('counts every pair of three holders at once', () => {
    expect(findOverlaps([hold('m', 'a', 0, 100), hold('m', 'b', 10, 100), hold('m', 'c', 20, 100)])).toHaveLength(3);
  });
});

describe('HoldLog', () => {
  it('records a hold from start to end by its clock, with the lease end known at the start', () => {
    let now = 1_000;
    const log = new HoldLog(() => now);
    const end = log.start('m', 'a', 30_000);
    now = 1_250;
    end();
    expect(log.holds).toEqual([{ messageId: 'm', holder: 'a', startedAt: 1_000, endedAt: 1_250, leaseEndsAt: 31_000 }]);
  });

  it('records overlapping holds that findOverlaps then reports', () => {
    let now = 0;
    const log = new HoldLog(() => now);
    const endFirst = log.start('m', 'a', Infinity);
    now = 5;
    const endSecond = log.start('m', 'b', Infinity);
    now = 10;
    endFirst();
    endSecond();
    expect(findOverlaps(log.holds)).toHaveLength(1);
  });
});
