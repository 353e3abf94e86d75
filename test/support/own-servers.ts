/**
 * What every test helper that runs broker servers of its own shares: the
 * servers still running, killed when the test process exits or is
 * interrupted, and a poll until a condition holds.
 */

/** A server (or cluster) this process started and must not leave behind. */
export interface OwnServer {
  /** Kills its processes and removes its files, synchronously; safe to call twice. */
  destroySync(): void;
}

const live = new Set<OwnServer>();
let exitHookInstalled = false;

/** Remembers a server started by this process, to be killed on exit, SIGINT or SIGTERM if still running. */
export function trackServer(server: OwnServer): void {
  live.add(server);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const s of live) s.destroySync();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const s of live) s.destroySync();
      process.exit(130);
    });
  }
}

/** Whether the server is tracked: started and not yet destroyed. */
export function isTracked(server: OwnServer): boolean {
  return live.has(server);
}

/** Forgets the server; resolves whether it was tracked (so destroying twice does nothing the second time). */
export function untrackServer(server: OwnServer): boolean {
  return live.delete(server);
}

/** Polls `check` every `intervalMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function until(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
