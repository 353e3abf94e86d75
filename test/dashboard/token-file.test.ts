/**
 * The token file `redeliver dashboard` writes when it makes its token up:
 * owner-only, never written through a symbolic link, and removed only while
 * it still holds this dashboard's token.
 */
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removeTokenFile, tokenFilePath, writeTokenFile } from '../../src/dashboard/token-file.js';
import { UnsafeFileError } from '../../src/util/private-file.js';

const root = mkdtempSync(join(tmpdir(), 'redeliver-token-file-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the dashboard token file', () => {
  it('is named for the port, in $REDELIVER_STATE_DIR', () => {
    expect(tokenFilePath({ REDELIVER_STATE_DIR: '/srv/state' }, 8080)).toBe('/srv/state/dashboard-8080.token');
  });

  it('is written owner-only, in a directory created owner-only', async () => {
    const dir = join(root, 'fresh', '.redeliver');
    const path = join(dir, 'dashboard-1.token');
    await writeTokenFile(path, 'the-token-0123456789');
    expect(readFileSync(path, 'utf8')).toBe('the-token-0123456789\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('is never written through a symbolic link another user could have planted', async () => {
    const target = join(root, 'target');
    writeFileSync(target, 'untouched');
    const path = join(root, 'dashboard-2.token');
    symlinkSync(target, path);
    await expect(writeTokenFile(path, 'the-token-0123456789')).rejects.toThrow(UnsafeFileError);
    expect(readFileSync(target, 'utf8')).toBe('untouched');
    expect(lstatSync(path).isSymbolicLink()).toBe(true);
  });

  it('is removed only while it holds this dashboard token', async () => {
    const path = join(root, 'dashboard-3.token');
    await writeTokenFile(path, 'a-later-dashboards-token');
    expect(await removeTokenFile(path, 'this-dashboards-token')).toBe(false);
    expect(existsSync(path)).toBe(true);
    expect(await removeTokenFile(path, 'a-later-dashboards-token')).toBe(true);
    expect(existsSync(path)).toBe(false);
    expect(await removeTokenFile(path, 'a-later-dashboards-token')).toBe(false);
  });
});
