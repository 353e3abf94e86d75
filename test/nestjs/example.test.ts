/**
 * The README's NestJS example is examples/nestjs/main.ts, and it runs as
 * written: under tsx, against a SQLite file in a fresh directory, it handles
 * one order and exits.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const example = join(root, 'examples/nestjs/main.ts');

describe('the README NestJS example', () => {
  it('is examples/nestjs/main.ts', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## NestJS\n'));
    const block = /```ts\n([\s\S]*?)```/.exec(section);
    expect(block?.[1]).toBe(readFileSync(example, 'utf8'));
  });

  it('runs as written: handles one order and exits', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'redeliver-nest-example-'));
    try {
      // tsx maps the package's own names (redeliver, redeliver/nestjs ...) to the sources through tsconfig paths.
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', import.meta.resolve('tsx'), example], {
        cwd,
        env: { ...process.env, TSX_TSCONFIG_PATH: join(root, 'tsconfig.json') },
        timeout: 60_000,
      });
      expect(stdout).toBe('reserved book-42 for order o-1\n');
      expect(existsSync(join(cwd, 'orders.db'))).toBe(true);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
