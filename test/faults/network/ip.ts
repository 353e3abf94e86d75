/**
 * iproute2 from the fault suite: runs `ip` and `tc` synchronously (each
 * call takes milliseconds) and throws with the command and its error output
 * when one fails, and builds the command line that runs a program inside a
 * network namespace.
 */
import { spawnSync } from 'node:child_process';

/** Runs `ip <args>`; resolves its standard output. Throws naming the command when it fails. */
export function ip(...args: string[]): string {
  return run('ip', args);
}

/** Runs `tc <args>`; resolves its standard output. Throws naming the command when it fails. */
export function tc(...args: string[]): string {
  return run('tc', args);
}

/** Runs `ip <args>` and ignores a failure (for cleanup of what may already be gone). */
export function ipQuietly(...args: string[]): void {
  spawnSync('ip', args, { stdio: 'ignore' });
}

/** The command line that runs `argv` inside namespace `ns`: `ip netns exec` enters it and execs the program, so the pid stays the program's. */
export function inNamespace(ns: string, argv: readonly string[]): string[] {
  return ['ip', 'netns', 'exec', ns, ...argv];
}

/**
 * Why the network cannot be built here, or undefined when it can: it needs
 * root (namespaces, veths) and iproute2's `ip` and `tc`.
 */
export function networkUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const tool of ['ip', 'tc']) {
    const probe = spawnSync(tool, ['-V'], { stdio: 'ignore' });
    if (probe.error !== undefined || probe.status !== 0) return `no ${tool} (iproute2) on the PATH`;
  }
  return undefined;
}

function run(tool: string, args: readonly string[]): string {
  const result = spawnSync(tool, args, { encoding: 'utf8' });
  if (result.error) throw new Error(`${tool} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${tool} ${args.join(' ')}: ${result.stderr.trim() || `exit code ${result.status}`}`);
  return result.stdout;
}
