import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { registerPlan } from '../../src/cli/commands/plan.js';
import { serveDashboard } from '../../src/cli/commands/dashboard.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { buildProgram, runProgram } from '../../src/cli/program.js';
import { capture } from './support.js';
import { tokenFromFile } from '../dashboard/support.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const fixture = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'planning', 'fixtures', 'policy.ts');

/** A state directory no dashboard has announced itself in. */
const noDashboard = { REDELIVER_STATE_DIR: join(dir, 'no-dashboard') };

async function plan(args: readonly string[], env: Record<string, string> = noDashboard): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = capture();
  const stderr = capture();
  const program = buildProgram({ stdout, stderr, env });
  registerPlan(program);
  const code = await runProgram(program, ['node', 'redeliver', 'plan', ...args]);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

describe('redeliver plan', () => {
  it('prints the NServiceBus defaults as a table with totals and no conflicts', async () => {
    const run = await plan([]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/ATTEMPT\s+KIND\s+ROUND\s+DELAY BEFORE\s+ELAPSED P0\s+P50\s+P99\s+P100/);
    expect(run.stdout).toMatch(/\n\s+7\s+delayed\s+1\s+10 s\s+10 s\s+10 s\s+10 s\s+10 s\n/);
    expect(run.stdout).toContain('Attempts: 24, in 4 rounds');
    expect(run.stdout).toContain('Error queue (retries-exhausted) after: p50 1 min, p99 1 min, longest 1 min');
    expect(run.stdout).toContain('No conflicts with sqlite, redis, rabbitmq (classic queues, RabbitMQ 4), jetstream');
  });

  it('--deadline stops the schedule where the deadline does', async () => {
    const run = await plan(['--deadline', '25s']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Attempts: 12, in 2 rounds');
    expect(run.stdout).toContain('Error queue (expired) after: p50 10 s, p99 10 s, longest 10 s');
    expect(run.stdout).toContain('Deadline 25 s after the first attempt: no retry is scheduled to come back at or after it');
    const json = JSON.parse((await plan(['--deadline', '25s', '--json'])).stdout) as Record<string, unknown>;
    expect(json).toMatchObject({ attempts: 12, reason: 'expired', deadlineMs: 25_000 });
    expect((await plan(['--deadline', '0'])).code).not.toBe(0);
  });

  it('prints the documented JSON shape', async () => {
    const run = await plan(['--immediate', '0', '--delayed', '4', '--backoff', 'nsqRequeue', '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({ attempts: 5, longestToErrorQueueMs: 900_000, conflicts: [] });
    const schedule = report['schedule'] as Record<string, unknown>[];
    expect(schedule.map((a) => a['elapsedP50Ms'])).toEqual([0, 90_000, 270_000, 540_000, 900_000]);
    expect(Object.keys(schedule[1]!).slice(0, 5)).toEqual(['attempt', 'kind', 'delayMs', 'elapsedP50Ms', 'elapsedP99Ms']);
    expect(run.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('reads a TypeScript policy module, lets flags override it, and checks one transport', async () => {
    const run = await plan([fixture, '--delayed', '2', '--handler-ms', '20s', '--transport', 'redis', '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as { attempts: number; conflicts: { id: string; transport: string }[] };
    // The module: 2 immediate retries, lease 45 s; the flag: 2 delayed retries. A round of 3 × 20 s outlasts the 45 s lease.
    expect(report.attempts).toBe(9);
    expect(report.conflicts.map((c) => `${c.transport} ${c.id}`)).toEqual(['redis lease']);
  });

  it("checks NSQ against nsqd's --max-msg-timeout and RocketMQ against the group's retryMaxTimes", async () => {
    const run = await plan(['--handler-ms', '10s', '--lease', '90s', '--transport', 'nsq', '--max-msg-timeout', '45s', '--json']);
    expect(run.code).toBe(0);
    const nsq = JSON.parse(run.stdout) as { conflicts: { id: string; transport: string; what: string }[] };
    expect(nsq.conflicts.map((c) => `${c.transport} ${c.id}`)).toEqual(['nsq lease']);
    expect(nsq.conflicts[0]!.what).toContain('of 45 s');
    const rocketmq = await plan(['--handler-ms', '10s', '--transport', 'rocketmq', '--max-reconsume-times', '2', '--json']);
    const report = JSON.parse(rocketmq.stdout) as { conflicts: { id: string; what: string }[] };
    expect(report.conflicts.map((c) => c.id)).toEqual(['lease', 'max-reconsume']);
    expect(report.conflicts[1]!.what).toContain('after 3 deliveries');
  });

  it('shows the RabbitMQ 4 quorum conflicts and writes the chart', async () => {
    const svg = join(dir, 'plan.svg');
    const run = await plan(['--delayed', '8', '--backoff', 'exponential(1s,2,5m)|fullJitter', '--handler-ms', '6m', '--transport', 'rabbitmq', '--queue-type', 'quorum', '--svg', svg]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Conflicts (2), checked against rabbitmq (quorum queues, RabbitMQ 4):');
    expect(run.stdout).toContain('rabbitmq consumer-timeout:');
    expect(run.stdout).toContain('rabbitmq delivery-limit:');
    expect(run.stdout).toContain(`Chart written to ${svg}`);
    const chart = readFileSync(svg, 'utf8');
    expect(chart).toContain('<svg');
    expect(chart.match(/<polyline /g)).toHaveLength(4);
  });

  it('exits 2 with a clear message for bad input', async () => {
    const badBackoff = await plan(['--backoff', 'exponential(1s,0.5)']);
    expect(badBackoff.code).toBe(2);
    expect(badBackoff.stderr).toContain('multiplier');
    const depth = await plan(['--queue-depth', '10']);
    expect(depth.code).toBe(2);
    expect(depth.stderr).toContain('--queue-depth needs --handler-ms');
    const missing = await plan([join(dir, 'nope.ts')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('does not exist');
    expect((await plan(['--handler-ms', 'soon'])).code).toBe(2);
    expect((await plan(['--transport', 'kafka'])).code).toBe(2);
  });

  it('shows the chart on a running dashboard, and not with --no-dashboard', async () => {
    const env = { REDELIVER_STATE_DIR: join(dir, 'state') };
    const abort = new AbortController();
    const quiet = () => new Writable({ write: (_chunk, _enc, done) => done() });
    let ready: (url: string) => void = () => undefined;
    const listening = new Promise<string>((resolve) => (ready = resolve));
    const served = serveDashboard('memory', { port: 0, host: '127.0.0.1', errorQueue: [] }, {
      out: quiet(),
      err: quiet(),
      signal: abort.signal,
      env,
      openTransport: async () => new MemoryTransport(),
      onReady: (url) => ready(url),
    });
    try {
      const url = await listening;
      const json = await plan(['--json'], env);
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({ attempts: 24 });
      const shown = /^Chart shown on the dashboard: (\S+)$/m.exec(json.stderr);
      expect(shown, json.stderr).not.toBeNull();
      // The operator reads the charts with the token `redeliver dashboard` made up; plan needed none.
      const operator = { headers: { Authorization: `Bearer ${tokenFromFile(env, url)}` } };
      const list = (await (await fetch(new URL('api/charts', url), operator)).json()) as { charts: { title: string }[] };
      expect(list.charts.map((c) => c.title)).toEqual(['Retry plan: 24 attempts, longest 1 min to the error queue']);
      const svg = await (await fetch(shown![1]!, operator)).text();
      expect(svg).toContain('<svg');
      const off = await plan(['--no-dashboard'], env);
      expect(off.stdout).not.toContain('dashboard');
    } finally {
      abort.abort();
      await served;
    }
  });
});
