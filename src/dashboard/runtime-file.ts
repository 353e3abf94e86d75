/**
 * The runtime file of a running `redeliver dashboard`:
 * `<state dir>/dashboard.json`, holding `{ url, pid, chartToken }`, readable
 * by its owner only. Command line tools on the same machine read it to show
 * their charts on the dashboard.
 */
import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { mkdir, open, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** What the runtime file says. */
export interface DashboardRuntime {
  /** Where the dashboard listens, such as `http://127.0.0.1:8080/`. */
  readonly url: string;
  /** The process serving it. */
  readonly pid: number;
  /** The secret that admits charts (the dashboard's `chartToken`). */
  readonly chartToken: string;
}

/** The directory of redeliver's runtime files: `$REDELIVER_STATE_DIR`, else `~/.redeliver`. */
export function stateDir(env: Readonly<Record<string, string | undefined>>): string {
  return env['REDELIVER_STATE_DIR'] || join(homedir(), '.redeliver');
}

/** Where the dashboard's runtime file is. */
export function runtimeFilePath(env: Readonly<Record<string, string | undefined>>): string {
  return join(stateDir(env), 'dashboard.json');
}

/**
 * Writes the runtime file with mode 0600, creating its directory with mode
 * 0700 when missing. It replaces the file in one step (a new file renamed
 * over it), so a reader never sees half of it.
 */
export async function writeRuntimeFile(path: string, runtime: DashboardRuntime): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(temporary, JSON.stringify(runtime) + '\n', { mode: 0o600, flag: 'wx' });
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/**
 * The runtime file's content, or undefined when there is none, it is not
 * one, or it cannot be trusted: it must be a regular file (a symbolic link
 * is not followed) of the current user that no one else can read or write
 * (mode 0600 or tighter). A file another user planted in a shared state
 * directory could otherwise send charts, and the chart token, where they
 * choose.
 */
export async function readRuntimeFile(path: string): Promise<DashboardRuntime | undefined> {
  let value: unknown;
  try {
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      if (!isOwnPrivateFile(await handle.stat())) return undefined;
      value = JSON.parse(await handle.readFile('utf8'));
    } finally {
      await handle.close();
    }
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { url, pid, chartToken } = value as Record<string, unknown>;
  if (typeof url !== 'string' || !/^http:\/\/[^/]/.test(url) || !Number.isSafeInteger(pid) || (pid as number) <= 0 || typeof chartToken !== 'string' || chartToken === '') {
    return undefined;
  }
  return { url, pid: pid as number, chartToken };
}

/**
 * Removes the runtime file if it still names process `pid` (a dashboard
 * started later may have replaced it). Resolves whether it removed it.
 */
export async function removeRuntimeFile(path: string, pid: number): Promise<boolean> {
  if ((await readRuntimeFile(path))?.pid !== pid) return false;
  try {
    await unlink(path);
    return true;
  } catch {
    return false;
  }
}

/** Whether `stats` are of a regular file of the current user that no other user may read or write. */
function isOwnPrivateFile(stats: Stats): boolean {
  const uid = process.getuid?.();
  return stats.isFile() && (uid === undefined || stats.uid === uid) && (stats.mode & 0o077) === 0;
}

/** Whether a process with this id is running (one of another user counts). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
