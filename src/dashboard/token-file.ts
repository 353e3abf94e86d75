/**
 * The token file of a running `redeliver dashboard` that made its token up:
 * `<state dir>/dashboard-<port>.token`, holding the token and a newline,
 * readable by its owner only. The start line says where it is rather than
 * printing the token, which would end up in service logs.
 */
import { constants } from 'node:fs';
import { mkdir, open, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { writePrivateFile } from '../util/private-file.js';
import { stateDir } from './runtime-file.js';

/** Where the token of the dashboard listening on `port` is written. */
export function tokenFilePath(env: Readonly<Record<string, string | undefined>>, port: number): string {
  return join(stateDir(env), `dashboard-${port}.token`);
}

/**
 * Writes `token` to `path` with mode 0600, creating its directory with mode
 * 0700 when missing; never through a symbolic link, and never into another
 * user's file (see private-file.ts).
 */
export async function writeTokenFile(path: string, token: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writePrivateFile(path, `${token}\n`);
}

/**
 * Removes the token file if it still holds `token` (a dashboard started
 * later on the same port may have replaced it). Resolves whether it did.
 */
export async function removeTokenFile(path: string, token: string): Promise<boolean> {
  try {
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      if ((await handle.readFile('utf8')) !== `${token}\n`) return false;
    } finally {
      await handle.close();
    }
    await unlink(path);
    return true;
  } catch {
    return false;
  }
}
