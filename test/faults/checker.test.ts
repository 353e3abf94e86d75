import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { account } from './checker.js';
import { openEvidenceLog, readEvidence } from './evidence-log.js';
import { attemptFails, behaviourOf, DEFAULT_MIX } from './failure-mix.js';

describe('fault checker', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('finds a known lost id, a known duplicate and a pending one in fsync-logged evidence', () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-checker-'));
    dirs.push(dir);
    const producer = openEvidenceLog(join(dir, 'producer.log'));
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) producer.append(id);
    producer.close();
    const worker1 = openEvidenceLog(join(dir, 'worker-1.log'));
    for (const id of ['a', 'b']) worker1.append(id);
    worker1.close();
    // The restarted worker handled b again (killed between its log line and its ack), and z,
    // whose send the killed producer never saw resolve; its last line was cut mid-write.
    writeFileSync(join(dir, 'worker-2.log'), 'b\nz\nf-partial');

    const result = account({
      confirmed: readEvidence(join(dir, 'producer.log')),
      handled: readEvidence(join(dir, 'worker-1.log'), join(dir, 'worker-2.log'), join(dir, 'missing.log')),
      errored: ['c'],
      pending: ['d', 'z'],
    });

    expect(result.messages).toBe(6);
    expect(result.lost).toEqual(['e', 'f']);
    expect(result.duplicates).toBe(1);
    expect(result.duplicatedIds).toEqual(['b']);
    expect(result.handled).toBe(2);
    expect(result.errored).toBe(1);
    expect(result.pending).toBe(1);
    expect(result.unconfirmedSeen).toBe(1);
  });

  it('counts each extra handling as a duplicate and an id handled after an error-queue replay once', () => {
    const result = account({ confirmed: ['a', 'b'], handled: ['a', 'a', 'a', 'b'], errored: ['b'], pending: ['a'] });
    expect(result.duplicates).toBe(2);
    expect(result.lost).toEqual([]);
    expect(result.handled).toBe(2);
    expect(result.errored).toBe(0);
    expect(result.pending).toBe(0);
  });

  it('assigns behaviours by seeded id hash, near the mix shares, and fails the right attempts', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) {
      const b = behaviourOf(`m-${i}`, DEFAULT_MIX, 7);
      counts.set(b, (counts.get(b) ?? 0) + 1);
      expect(behaviourOf(`m-${i}`, DEFAULT_MIX, 7)).toBe(b);
    }
    expect(counts.get('ok')! / 10_000).toBeCloseTo(0.7, 1);
    expect(counts.get('always')! / 10_000).toBeCloseTo(0.05, 1);
    expect(attemptFails('once', { attempt: 1, delayedAttempt: 0, replayed: false })).toBe(true);
    expect(attemptFails('once', { attempt: 2, delayedAttempt: 0, replayed: false })).toBe(false);
    expect(attemptFails('round', { attempt: 3, delayedAttempt: 0, replayed: false })).toBe(true);
    expect(attemptFails('round', { attempt: 4, delayedAttempt: 1, replayed: false })).toBe(false);
    expect(attemptFails('until-replayed', { attempt: 9, delayedAttempt: 2, replayed: false })).toBe(true);
    expect(attemptFails('until-replayed', { attempt: 1, delayedAttempt: 0, replayed: true })).toBe(false);
  });
});
