/**
 * Child processes of the fault suite: workers, producers and the CLI, run as
 * `node --import tsx <script>` so the harness can kill them with SIGKILL.
 * Their output goes to a file beside the scenario's evidence, for diagnosis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A running child process. */
export class Child {
  readonly exited: Promise<number | null>;
  #code: number | null | undefined;

  private constructor(
    readonly label: string,
    private readonly process: ChildProcess,
  ) {
    this.exited = new Promise((resolve) =>
      process.once('exit', (code, signal) => {
        this.#code = code ?? (signal ? null : code);
        resolve(this.#code);
      }),
    );
  }

  /**
   * Starts `node --import tsx <script> ...args` from the repository root, writing its output to `outputPath`;
   * `env` is added to this process's environment; `place` wraps the command line to run it elsewhere (a
   * network namespace: the wrapper must exec the program, so that signals reach it). Default: run directly.
   */
  static start(
    label: string,
    script: string,
    args: readonly string[],
    outputPath: string,
    env: Readonly<Record<string, string>> = {},
    place: (argv: readonly string[]) => string[] = (argv) => [...argv],
  ): Child {
    const out = openSync(outputPath, 'a');
    const [file, ...argv] = place([process.execPath, '--import', 'tsx', script, ...args]);
    const child = spawn(file!, argv, { cwd: ROOT, stdio: ['ignore', out, out], env: { ...process.env, ...env } });
    closeSync(out);
    return new Child(label, child);
  }

  /** Whether the process has exited. */
  get running(): boolean {
    return this.#code === undefined;
  }

  /** The exit code, null after a signal, undefined while running. */
  get code(): number | null | undefined {
    return this.#code;
  }

  /** Kills the process with SIGKILL and resolves when it is gone. */
  async kill9(): Promise<void> {
    if (this.running) this.process.kill('SIGKILL');
    await this.exited;
  }

  /** Asks the process to stop (SIGTERM); kills it if it has not exited within `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.running) return;
    this.process.kill('SIGTERM');
    const timer = setTimeout(() => this.process.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** The repository root, where child scripts' paths are resolved. */
export const REPOSITORY_ROOT = ROOT;
