/**
 * Timeouts follow monotonic time: setting the wall clock back neither
 * delays a deadline nor, set forward, fires every pending one at once.
 */
import { describe, expect, it } from 'vitest';
import { Deadlines } from '../../src/time/deadlines.js';
import { FakeClock } from '../../src/time/fake-clock.js';

describe('Deadlines when the wall clock is set', () => {
  it('a 100 ms deadline fires after 100 ms when the wall clock steps back 5 s', async () => {
    const clock = new FakeClock(1_000_000);
    const deadlines = new Deadlines(clock);
    let firedAfter = -1;
    const start = clock.monotonic();
    deadlines.add(100, () => (firedAfter = clock.monotonic() - start));
    clock.stepWall(-5_000);
    await clock.advance(100);
    expect(firedAfter).toBe(100);
  });

  it('a forward step of the wall clock fires no deadline early', async () => {
    const clock = new FakeClock(1_000_000);
    const deadlines = new Deadlines(clock);
    const fired: string[] = [];
    deadlines.add(100, () => fired.push('100 ms'));
    deadlines.add(10_000, () => fired.push('10 s'));
    clock.stepWall(60_000);
    await clock.advance(100);
    expect(fired).toEqual(['100 ms']);
    await clock.advance(9_899);
    expect(fired).toEqual(['100 ms']);
    await clock.advance(1);
    expect(fired).toEqual(['100 ms', '10 s']);
  });
});

describe('FakeClock.stepWall', () => {
  it('moves wall time only; sleepers follow monotonic time', async () => {
    const clock = new FakeClock(1_000);
    let woke = false;
    void clock.sleep(50).then(() => (woke = true));
    clock.stepWall(-500);
    expect(clock.now()).toBe(500);
    expect(clock.monotonic()).toBe(1_000);
    await clock.advance(49);
    expect(woke).toBe(false);
    await clock.advance(1);
    expect(woke).toBe(true);
    expect(clock.now()).toBe(550);
    expect(clock.monotonic()).toBe(1_050);
  });
});
