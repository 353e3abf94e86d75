import { describe, expect, it } from 'vitest';
import { Deadlines } from '../../src/time/deadlines.js';
import { FakeClock } from '../../src/time/fake-clock.js';

describe('Deadlines: many deadlines on one timer', () => {
  it('expires each entry exactly at its deadline, in order, and never one that was deleted', async () => {
    const clock = new FakeClock(0);
    const deadlines = new Deadlines(clock);
    const expired: string[] = [];
    const at = (name: string, ms: number) => deadlines.add(ms, () => expired.push(`${name}@${clock.now()}`));
    at('a', 1_000);
    const b = at('b', 2_000);
    at('c', 3_000);
    // One sleep, for the earliest deadline; an earlier one re-arms it.
    expect(clock.pending).toBe(1);
    at('early', 500);
    expect(clock.pending).toBe(1);
    deadlines.delete(b);
    await clock.advance(5_000);
    expect(expired).toEqual(['early@500', 'a@1000', 'c@3000']);
    expect(deadlines.size).toBe(0);
  });

  it('race settles like the promise, or rejects with the timeout error at the deadline', async () => {
    const clock = new FakeClock(0);
    const deadlines = new Deadlines(clock);
    await expect(deadlines.race(Promise.resolve('ok'), 100, () => new Error('late'))).resolves.toBe('ok');
    await expect(deadlines.race(Promise.reject(new Error('no')), 100, () => new Error('late'))).rejects.toThrow('no');
    const hanging = deadlines.race(new Promise(() => undefined), 250, () => new Error('late'));
    let settledAt = -1;
    hanging.catch(() => (settledAt = clock.now()));
    await clock.advance(249);
    expect(settledAt).toBe(-1);
    await clock.advance(1);
    expect(settledAt).toBe(250);
    await expect(hanging).rejects.toThrow('late');
  });

  it('keeps no timer armed once nothing is pending, so an idle process can exit', async () => {
    const clock = new FakeClock(0);
    const deadlines = new Deadlines(clock);
    const entry = deadlines.add(60_000, () => undefined);
    expect(clock.pending).toBe(1);
    deadlines.delete(entry);
    await new Promise((r) => setImmediate(r));
    expect(clock.pending).toBe(0);
    // And it re-arms for the next entry.
    let fired = false;
    deadlines.add(10, () => (fired = true));
    await clock.advance(10);
    expect(fired).toBe(true);
  });

  it('close stops the timer; pending entries never expire', async () => {
    const clock = new FakeClock(0);
    const deadlines = new Deadlines(clock);
    let fired = false;
    deadlines.add(10, () => (fired = true));
    deadlines.close();
    await clock.advance(100);
    expect(fired).toBe(false);
    expect(clock.pending).toBe(0);
  });
});
