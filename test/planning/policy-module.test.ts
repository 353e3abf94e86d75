import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPolicyModule, PolicyModuleError } from '../../src/planning/policy-module.js';

const fixtures = join(fileURLToPath(new URL('.', import.meta.url)), 'fixtures');

describe('loadPolicyModule', () => {
  it('loads a TypeScript module through tsx and keeps the options a plan reads', async () => {
    const input = await loadPolicyModule(join(fixtures, 'policy.ts'));
    expect(input.recoverability?.immediateRetries).toBe(2);
    expect(input.recoverability?.delayedRetries).toBe(4);
    expect(typeof input.recoverability?.delayedBackoff).toBe('function');
    expect(input.flowControl).toEqual({ retryBudget: true });
    expect(input.leaseMs).toBe(45_000);
  });

  it('says what is wrong with a module it cannot use', async () => {
    await expect(loadPolicyModule(join(fixtures, 'missing.ts'))).rejects.toThrow(/does not exist/);
    await expect(loadPolicyModule(join(fixtures, 'no-options.mjs'))).rejects.toThrow(PolicyModuleError);
    await expect(loadPolicyModule(join(fixtures, 'no-options.mjs'))).rejects.toThrow(/exports no endpoint options/);
  });
});
