import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { registerSimulate } from '../../src/cli/commands/simulate.js';
import { buildProgram, runProgram } from '../../src/cli/program.js';
import { capture } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-outage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const fixture = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'planning', 'fixtures', 'policy.ts');

/** A small scenario: 16 messages/s on a downstream serving 20/s, down for 30 s, 2 min of load after it. */
const SMALL = ['--capacity', '20', '--warmup', '5s', '--outage', '30s', '--after', '2m', '--concurrency', '4'];

async function simulate(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = capture();
  const stderr = capture();
  // A state folder without a dashboard, so no chart goes to one running on this machine.
  const program = buildProgram({ stdout, stderr, env: { REDELIVER_STATE_DIR: join(dir, 'state') } });
  registerSimulate(program);
  const code = await runProgram(program, ['node', 'redeliver', 'simulate', 'outage', ...args]);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

interface Report {
  scenario: Record<string, number>;
  rows: { setting: string; peakLoadRatio: number; deadLettered: number; handled: number; sent: number; callsPerSecond: number[] }[];
}

describe('redeliver simulate outage', () => {
  it('prints a table with a row per setting', async () => {
    const run = await simulate([...SMALL, '--setting', 'none,consumerBackoff,retryBudget']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('Downstream capacity 20 calls/s, load 16 messages/s (80 %), down from 5 s to 35 s (30 s), load until 155 s; concurrency 4, seed 11.');
    expect(run.stdout).toMatch(/SETTING\s+PEAK LOAD\s+MEAN LOAD\s+DEAD-LETTERED\s+DRAIN\s+IDEAL DRAIN\s+HANDLED\s+SENT\n/);
    // Without flow control each message makes six attempts when it arrives and six more on its first delayed retry 10 s later, both
    // within the 30 s outage: 12× the normal load. Nothing is dead-lettered, as 30 s is within the 60 s of delayed retries.
    expect(run.stdout).toMatch(/\nnone\s+12×\s+[\d.]+×\s+0\s+[\d.]+ s\s+120 s\s+2,480\s+2,480\n/);
    expect(run.stdout).toMatch(/\nconsumerBackoff\s+0\.\d+×/);
    expect(run.stdout).toMatch(/\nretryBudget\s+1\.\d+×/);
    expect(run.stdout).not.toMatch(/\n(rateLimit|combined)\s/);
  });

  it('prints one JSON object: the scenario and a row per setting with its calls per second', async () => {
    const run = await simulate([...SMALL, '--setting', 'none', '--setting', 'retryBudget', '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as Report;
    expect(report.scenario).toEqual({ capacityPerSec: 20, loadShare: 0.8, warmupSec: 5, outageSec: 30, afterSec: 120, concurrency: 4, seed: 11 });
    expect(report.rows.map((row) => row.setting)).toEqual(['none', 'retryBudget']);
    expect(Object.keys(report.rows[0]!)).toEqual(['setting', 'peakLoadRatio', 'meanLoadRatio', 'deadLettered', 'drainSeconds', 'idealDrainSeconds', 'handled', 'sent', 'callsPerSecond']);
    for (const row of report.rows) {
      expect(row.handled + row.deadLettered).toBe(row.sent);
      expect(row.callsPerSecond.slice(0, 5)).toEqual([16, 16, 16, 16, 16]);
      expect(row.callsPerSecond.length).toBeGreaterThanOrEqual(155);
    }
    expect(report.rows[0]!.peakLoadRatio).toBe(12);
  });

  it('writes the chart of calls per second over time, with the outage window', async () => {
    const svg = join(dir, 'outage.svg');
    const run = await simulate([...SMALL, '--setting', 'none,combined', '--svg', svg]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Chart written to ${svg}`);
    const text = readFileSync(svg, 'utf8');
    expect(text.startsWith('<svg')).toBe(true);
    expect(text).toContain('outage from 5 s to 35 s');
    expect(text).toContain('>none<');
    expect(text).toContain('>combined<');
  });

  it('runs a policy module as "yours" next to "none"', async () => {
    const run = await simulate([fixture, ...SMALL, '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as Report;
    expect(report.rows.map((row) => row.setting)).toEqual(['none', 'yours']);
    // The module: 2 immediate retries and the retry budget, so at most about 1.1× plus 1/s instead of 24×.
    const yours = report.rows[1]!;
    expect(yours.peakLoadRatio).toBeLessThan(1.5);
    expect(yours.deadLettered).toBe(0);
    expect(yours.handled).toBe(yours.sent);
  });

  it('runs the policy flags as "yours": no retries dead-letter every message of the outage', async () => {
    const run = await simulate([...SMALL, '--immediate', '0', '--delayed', '0', '--setting', 'retryBudget', '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as Report;
    expect(report.rows.map((row) => row.setting)).toEqual(['retryBudget', 'yours']);
    expect(report.rows[1]!.deadLettered).toBe(16 * 30);
  });

  it('refuses bad input with a usage error (exit 2)', async () => {
    for (const args of [
      ['--load', '1'],
      ['--load', '0'],
      ['--capacity', '0'],
      ['--capacity', 'many'],
      ['--outage', '0s'],
      ['--outage', '1.5s'],
      ['--warmup', 'soon'],
      ['--setting', 'none,bogus'],
      ['--concurrency', '0'],
      ['--rate-limit-wait', '1s'],
      ['--immediate', '-1'],
    ]) {
      const run = await simulate(args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout, args.join(' ')).toBe('');
      expect(run.stderr.length, args.join(' ')).toBeGreaterThan(0);
    }
    const missing = await simulate([join(dir, 'missing.ts')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('does not exist');
    const refused = join(dir, 'refused.mjs');
    writeFileSync(refused, 'export default { recoverability: { immediateRetries: -1 } };\n');
    const run = await simulate([refused]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('the policy cannot run: recoverability.immediateRetries must be a whole number');
  });
});
