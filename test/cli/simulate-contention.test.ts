import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { registerSimulate } from '../../src/cli/commands/simulate.js';
import { buildProgram, runProgram } from '../../src/cli/program.js';
import { simulateContention } from '../../src/simulation/contention.js';
import { capture, tempFolder, type CliRun } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

async function simulate(args: readonly string[]): Promise<CliRun> {
  const stdout = capture();
  const stderr = capture();
  const program = buildProgram({ stdout, stderr, env: { REDELIVER_STATE_DIR: join(tmpdir(), 'redeliver-no-dashboard') } });
  registerSimulate(program);
  const code = await runProgram(program, ['node', 'redeliver', 'simulate', 'contention', ...args]);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** Whether every `<` of `xml` starts a tag and every tag is closed in order (the SVG has no comments, CDATA or processing instructions). */
function wellFormed(xml: string): boolean {
  const tags = [...xml.matchAll(/<(\/?)([a-zA-Z][\w:-]*)(?:\s+[\w:-]+="[^"<]*")*\s*(\/?)>/g)];
  if (tags.length !== (xml.match(/</g)?.length ?? 0)) return false;
  const open: string[] = [];
  for (const [, closing, name, selfClosing] of tags) {
    if (selfClosing) continue;
    if (!closing) open.push(name!);
    else if (open.pop() !== name) return false;
  }
  return open.length === 0;
}

describe('redeliver simulate contention', () => {
  it('prints the mean calls and completion times, one line per strategy and one column per N', async () => {
    const run = await simulate(['--clients', '3,8', '--runs', '5', '--seed', '2']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe('Contention for one row: 5 runs per point, seed 2, base 5 ms, cap 2000 ms, network hop |Normal(10 ms, 2 ms)|.');
    expect(lines[2]).toBe('Mean calls (reads + writes the server received)');
    expect(lines[3]).toMatch(/^STRATEGY\s+N=3\s+N=8$/);
    expect(lines.slice(4, 9).map((l) => l.split(/\s+/)[0])).toEqual(['none', 'exponential', 'equal', 'full', 'decorrelated']);
    expect(lines[10]).toBe('Mean completion time in ms (until the last client learned its write succeeded)');
    const { rows } = simulateContention({ clients: [3, 8], runs: 5, seed: 2 });
    const full = rows.filter((r) => r.strategy === 'full');
    expect(lines[7]!.split(/\s+/)).toEqual(['full', ...full.map((r) => Math.round(r.calls).toLocaleString('en-US'))]);
    expect(lines[15]!.split(/\s+/)).toEqual(['full', ...full.map((r) => Math.round(r.completionMs).toLocaleString('en-US'))]);
  });

  it('prints one JSON object with a row per strategy and N', async () => {
    const run = await simulate(['--clients', '4,6', '--runs', '3', '--strategy', 'full,exponential', '--base-ms', '2', '--cap-ms', '500', '--json']);
    expect(run.code).toBe(0);
    const json = JSON.parse(run.stdout) as { rows: Record<string, unknown>[] };
    expect(Object.keys(json)).toEqual(['rows']);
    const { rows } = simulateContention({ strategies: ['full', 'exponential'], clients: [4, 6], runs: 3, seed: 1, baseMs: 2, capMs: 500 });
    expect(json.rows).toEqual(
      rows.map((r) => ({
        strategy: r.strategy,
        clients: r.clients,
        calls: Math.round(r.calls * 10) / 10,
        writes: Math.round(r.writes * 10) / 10,
        completionMs: Math.round(r.completionMs * 10) / 10,
      })),
    );
    expect(json.rows.map((r) => [r.strategy, r.clients])).toEqual([['full', 4], ['full', 6], ['exponential', 4], ['exponential', 6]]);
  });

  it('writes a well-formed SVG chart with both panels and a line per strategy', async () => {
    const file = folder.path('contention.svg');
    const run = await simulate(['--clients', '2,5,10', '--runs', '3', '--svg', file]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Chart written to ${file}`);
    const svg = readFileSync(file, 'utf8');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(wellFormed(svg)).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(10);
    expect(svg).toContain('Work: mean calls (reads + writes)');
    expect(svg).toContain('Mean completion time');
    for (const strategy of ['none', 'exponential', 'equal', 'full', 'decorrelated']) expect(svg).toContain(`>${strategy}</text>`);
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it('keeps stdout to the JSON object when a chart is written too', async () => {
    const file = folder.path('with-json.svg');
    const run = await simulate(['--clients', '3', '--runs', '2', '--json', '--svg', file]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).rows).toHaveLength(5);
    expect(wellFormed(readFileSync(file, 'utf8'))).toBe(true);
  });

  it('exits 2 with a clear message on a bad flag', async () => {
    for (const [args, message] of [
      [['--clients', '10,abc'], /--clients <list>' argument '10,abc' is invalid. expected whole numbers of clients of at least 1/],
      [['--clients', '0'], /at least 1/],
      [['--runs', '0'], /--runs <count>' argument '0' is invalid. expected a whole number of at least 1/],
      [['--strategy', 'full,linear'], /unknown strategy "linear"/],
      [['--base-ms', '-5'], /expected a finite number of milliseconds/],
      [['--seed', '1.5'], /expected a whole number/],
    ] as const) {
      const run = await simulate(args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stdout).toBe('');
    }
  });
});
