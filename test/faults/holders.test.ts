import { describe, expect, it } from 'vitest';
import { joinDeliveries, judgeHolders, type CountedHold } from './holders.js';

const LEASE = 2_000;
function run(messageId: string, worker: number, deliveryCount: number, startedAt: number, endedAt: number): CountedHold {
  return { messageId, holder: `worker-${worker} delivery ${deliveryCount}`, deliveryCount, startedAt, endedAt, leaseEndsAt: startedAt + LEASE };
}

describe('joinDeliveries', () => {
  it('joins the runs of one delivery one after another, under the lease from the first start', () => {
    const joined = joinDeliveries([run('m-1#d0', 1, 1, 100, 150), run('m-1#d0', 1, 1, 150, 200), run('m-1#d0', 1, 1, 200, 260)]);
    expect(joined).toEqual([{ ...run('m-1#d0', 1, 1, 100, 260), leaseEndsAt: 100 + LEASE }]);
  });

  it("ends a joined hold's lease where one of its runs saw it lost, so a redelivery after that is no overlap", () => {
    const lostAt = 170;
    const joined = joinDeliveries([run('m-1#d0', 1, 1, 100, 150), { ...run('m-1#d0', 1, 1, 150, 260), leaseEndsAt: lostAt }]);
    expect(joined).toEqual([{ ...run('m-1#d0', 1, 1, 100, 260), leaseEndsAt: lostAt }]);
    const afterLoss = judgeHolders([run('m-1#d0', 1, 1, 100, 150), { ...run('m-1#d0', 1, 1, 150, 260), leaseEndsAt: lostAt }, run('m-1#d0', 2, 2, 180, 300)]);
    expect(afterLoss.early).toHaveLength(0);
    const beforeLoss = judgeHolders([run('m-1#d0', 1, 1, 100, 150), { ...run('m-1#d0', 1, 1, 150, 260), leaseEndsAt: lostAt }, run('m-1#d0', 2, 2, 160, 300)]);
    expect(beforeLoss.early).toHaveLength(1);
  });

  it('keeps a run that starts while another of the same holder and count runs apart', () => {
    expect(joinDeliveries([run('m-1#d0', 1, 2, 100, 300), run('m-1#d0', 1, 2, 200, 250)])).toHaveLength(2);
  });
});

describe('judgeHolders', () => {
  it('calls a delivery count given out a second time beside a held one repeated by the broker', () => {
    const verdict = judgeHolders([run('m-1#d0', 1, 1, 0, 50), run('m-1#d0', 1, 4, 100, 200), run('m-1#d0', 2, 1, 150, 250), run('m-1#d0', 1, 4, 200, 300)]);
    expect(verdict.repeated).toHaveLength(1);
    expect(verdict.stale).toHaveLength(0);
    expect(verdict.early).toHaveLength(0);
    expect(verdict.deliveries).toBe(3);
    expect(verdict.runs).toBe(4);
  });

  it('calls the same count in two holders at once repeated', () => {
    const verdict = judgeHolders([run('m-1#d0', 1, 2, 100, 200), run('m-1#d0', 2, 2, 150, 250)]);
    expect(verdict.repeated).toHaveLength(1);
  });

  it('calls an older delivery, given out once, starting after a newer one stale', () => {
    const verdict = judgeHolders([run('m-1#d0', 1, 3, 100, 200), run('m-1#d0', 2, 2, 127, 250)]);
    expect(verdict.stale).toHaveLength(1);
    expect(verdict.repeated).toHaveLength(0);
    expect(verdict.early).toHaveLength(0);
  });

  it('calls a raised count within the earlier lease early', () => {
    const verdict = judgeHolders([run('m-1#d0', 1, 1, 100, 2_500), run('m-1#d0', 2, 2, 1_000, 1_100)]);
    expect(verdict.early).toHaveLength(1);
    expect(verdict.repeated).toHaveLength(0);
  });

  it('passes a redelivery after the lease ran out, and counts a delayed copy beside its original apart', () => {
    const verdict = judgeHolders([run('m-1#d0', 1, 1, 100, 3_000), run('m-1#d0', 2, 2, 2_200, 2_300), run('m-1#d1', 2, 1, 1_500, 1_600)]);
    expect(verdict.early).toHaveLength(0);
    expect(verdict.repeated).toHaveLength(0);
    expect(verdict.copies).toBe(1);
  });
});
