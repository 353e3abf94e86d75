/**
 * Files the CLI and the error store create hold message bodies and
 * secrets: they are created readable by their owner only (mode 0600), and
 * never through a symbolic link, which another user of the machine could
 * have planted to make a privileged run write where they choose.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

/** A file that cannot be written safely: a symbolic link, not a regular file, or another user's. */
export class UnsafeFileError extends Error {
  override readonly name = 'UnsafeFileError';
}

/** Write-only, created when missing, never through a link, never blocking on a FIFO. */
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens `path` to write it from the start: a new file is created with mode
 * 0600; an existing regular file of the current user is truncated and set to
 * 0600. Rejects with {@link UnsafeFileError} for a symbolic link (even one to
 * a file), anything but a regular file, or another user's file.
 */
export async function openPrivateFile(path: string): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(path, WRITE_FLAGS, 0o600);
  } catch (error) {
    throw refusal(path, error);
  }
  try {
    checkOwnRegular(path, await handle.stat());
    await handle.chmod(0o600);
    await handle.truncate(0);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** Writes `data` to `path` as {@link openPrivateFile} opens it. */
export async function writePrivateFile(path: string, data: string | Uint8Array): Promise<void> {
  const handle = await openPrivateFile(path);
  try {
    await handle.writeFile(data);
  } finally {
    await handle.close();
  }
}

/**
 * Makes sure `path` can be opened as a database file: when missing it is
 * created empty with mode 0600 (`O_EXCL`, so a link planted meanwhile is not
 * followed); when present it must not be a symbolic link. Its mode is left
 * as it is, as its owner chose it.
 */
export function preparePrivateFile(path: string): void {
  let stats: Stats | undefined;
  try {
    stats = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (stats?.isSymbolicLink()) throw new UnsafeFileError(`${path} is a symbolic link: refusing to follow it (name the file itself)`);
  if (stats !== undefined) return;
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (error) {
    throw refusal(path, error);
  }
  try {
    checkOwnRegular(path, fstatSync(fd));
  } finally {
    closeSync(fd);
  }
}

function checkOwnRegular(path: string, stats: Stats): void {
  if (!stats.isFile()) throw new UnsafeFileError(`${path} is not a regular file`);
  const uid = process.getuid?.();
  if (uid !== undefined && stats.uid !== uid) throw new UnsafeFileError(`${path} belongs to another user (uid ${stats.uid}): refusing to write it`);
}

function refusal(path: string, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new UnsafeFileError(`${path} is a symbolic link: refusing to follow it (name the file itself)`);
  if (code === 'EEXIST') return new UnsafeFileError(`${path} appeared while it was being created: refusing to open it`);
  if (code === 'ENXIO') return new UnsafeFileError(`${path} is not a regular file`);
  return error as Error;
}
