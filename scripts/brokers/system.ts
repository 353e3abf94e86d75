/**
 * The machine-level pieces every broker's script shares: where downloads,
 * builds and run directories live, commands, probes, detached processes and
 * Debian packages installed without starting their services.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createConnection } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where downloads, builds and run directories live, outside the repository
 * so that a second `up` on the same machine downloads nothing:
 * `REDELIVER_BROKERS_HOME`, default `~/.cache/redeliver/brokers`.
 */
export const BROKERS_HOME = process.env['REDELIVER_BROKERS_HOME'] ?? join(homedir(), '.cache', 'redeliver', 'brokers');

/** A folder under {@link BROKERS_HOME}, made if missing. */
export function brokersDir(...parts: string[]): string {
  const dir = join(BROKERS_HOME, ...parts);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Runs a command; resolves its stdout, rejects with its stderr's last lines. */
export function run(command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, env: options.env ?? process.env, timeout: options.timeoutMs ?? 600_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (!error) return resolve(stdout);
        const tail = `${stderr}${stdout}`.trim().split('\n').slice(-15).join('\n');
        reject(new Error(`${command} ${args.join(' ')} failed: ${error.message.split('\n')[0]}${tail ? `\n${tail}` : ''}`));
      },
    );
  });
}

/** Whether a command is on the PATH. */
export async function onPath(command: string): Promise<boolean> {
  return run('sh', ['-c', `command -v ${command}`]).then(
    () => true,
    () => false,
  );
}

/** `go` from the PATH, or the toolchain's usual home; throws naming `what` needs it when there is neither. */
export async function goCommand(what: string): Promise<string> {
  if (await onPath('go')) return 'go';
  if (existsSync('/usr/local/go/bin/go')) return '/usr/local/go/bin/go';
  throw new Error(`Go is not installed (needed to build ${what} from the Go module proxy)`);
}

/** Whether something accepts TCP connections on `host`:`port` (default 127.0.0.1). */
export function listening(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host });
    const done = (up: boolean) => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** GETs `http://127.0.0.1:port/path`; resolves the status and body, or null when nothing answers. */
export function httpGet(port: number, path: string): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', timeout: 2_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end();
  });
}

/** Polls `check` every 200 ms until it holds; rejects naming `what` after `timeoutMs`. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Whether a process with this pid exists (and is not a zombie). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** The pid recorded in `pidFile` when that process is alive, else null. */
export function livePid(pidFile: string): number | null {
  if (!existsSync(pidFile)) return null;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : null;
}

/**
 * Starts `command` in a session of its own, detached from this process,
 * with stdout and stderr appended to `logFile`, and records its pid in
 * `pidFile`. Resolves the pid.
 */
export function spawnDetached(command: string, args: readonly string[], options: { logFile: string; pidFile: string; cwd?: string; env?: NodeJS.ProcessEnv }): number {
  const out = openSync(options.logFile, 'a');
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, detached: true, stdio: ['ignore', out, out] });
  child.unref();
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  writeFileSync(options.pidFile, `${child.pid}\n`);
  return child.pid;
}

/**
 * Stops the process in `pidFile`: SIGTERM, then SIGKILL after `graceMs`;
 * resolves once it is gone and `ports` (on `host`) are closed, and removes the pid file.
 */
export async function stopPid(pidFile: string, ports: readonly number[], graceMs = 15_000, host = '127.0.0.1'): Promise<void> {
  const pid = livePid(pidFile);
  if (pid !== null) {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) signal(pid, 'SIGKILL');
    while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(pidFile, { force: true });
  for (const port of ports) await waitFor(`port ${port} to close`, 30_000, async () => !(await listening(port, host)));
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(-pid, name); // its whole session (a JVM's or a wrapper script's children)
  } catch {
    try {
      process.kill(pid, name);
    } catch {
      // already gone
    }
  }
}

/** The installed version of a Debian package, or null. */
export async function debVersion(pkg: string): Promise<string | null> {
  try {
    const out = (await run('dpkg-query', ['-W', '-f', '${db:Status-Abbrev} ${Version}', pkg])).trim();
    return out.startsWith('ii ') ? out.slice(3).trim() : null;
  } catch {
    return null;
  }
}

let aptUpdated = false;

/**
 * Installs Debian packages that are missing, without letting dpkg start
 * their services (a `policy-rc.d` that exits 101 while apt runs): each
 * broker is started by its own script, on loopback, with the tests'
 * settings. Refuses without root. Resolves the packages it installed.
 */
export async function aptInstall(packages: readonly string[], say: (line: string) => void): Promise<string[]> {
  const missing: string[] = [];
  for (const pkg of packages) if ((await debVersion(pkg)) === null) missing.push(pkg);
  if (missing.length === 0) return missing;
  if (process.getuid?.() !== 0) throw new Error(`${missing.join(', ')} not installed, and installing needs root (run as root, or apt-get install ${missing.join(' ')})`);
  const policy = '/usr/sbin/policy-rc.d';
  const hadPolicy = existsSync(policy);
  const previous = hadPolicy ? readFileSync(policy) : null;
  writeFileSync(policy, '#!/bin/sh\n# written by redeliver brokers while apt-get runs: start no service\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    if (!aptUpdated) {
      say('apt-get update');
      await run('apt-get', ['update', '-q'], { env });
      aptUpdated = true;
    }
    say(`apt-get install ${missing.join(' ')}`);
    await run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...missing], { env, timeoutMs: 1_200_000 });
    return missing;
  } finally {
    if (previous !== null) writeFileSync(policy, previous, { mode: 0o755 });
    else rmSync(policy, { force: true });
  }
}

/** The upstream part of a Debian version: `5:7.0.15-1~deb12u10` → `7.0.15`. */
export function upstreamVersion(debian: string): string {
  return debian.replace(/^\d+:/, '').replace(/-[^-]*$/, '');
}
