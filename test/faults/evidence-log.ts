/**
 * Append-only, fsync'd logs of message ids: the durable evidence the fault
 * checker counts from. One id per line; a record is on disk before
 * `append` returns, so a process killed with SIGKILL loses at most the line
 * it was writing, which `readEvidence` ignores (it has no newline yet).
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';

/** An open evidence log. */
export interface EvidenceLog {
  /** Writes `id` and a newline, then fsyncs. */
  append(id: string): void;
  close(): void;
}

/** Opens (creating) the log at `path` for appending. */
export function openEvidenceLog(path: string): EvidenceLog {
  const fd = openSync(path, 'a');
  return {
    append(id) {
      if (id.includes('\n')) throw new Error(`evidence log: an id may not contain a newline: ${JSON.stringify(id)}`);
      writeSync(fd, `${id}\n`);
      fsyncSync(fd);
    },
    close() {
      closeSync(fd);
    },
  };
}

/** Every complete record of the logs at `paths`, in order; a missing file has none. */
export function readEvidence(...paths: string[]): string[] {
  const ids: string[] = [];
  for (const path of paths) {
    if (!existsSync(path)) continue;
    const text = readFileSync(path, 'utf8');
    const complete = text.slice(0, text.lastIndexOf('\n') + 1);
    for (const line of complete.split('\n')) if (line.length > 0) ids.push(line);
  }
  return ids;
}
