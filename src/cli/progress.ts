import type { OutputStream } from './program.js';

/** Operations smaller than this finish too fast to need a bar. */
export const PROGRESS_MIN_TOTAL = 100;

const BAR_WIDTH = 30;

/**
 * A one-line progress bar redrawn in place on a terminal, for operations
 * over many messages. It draws nothing when the stream is not a terminal
 * (a log file or a pipe gets no carriage returns) or when the operation is
 * small, and redraws only when the whole percentage changes.
 */
export class ProgressBar {
  readonly #stream: OutputStream;
  readonly #label: string;
  #total: number;
  #done = 0;
  #drawn = -1;
  readonly #enabled: boolean;

  constructor(stream: OutputStream, label: string, total: number) {
    this.#stream = stream;
    this.#label = label;
    this.#total = total;
    this.#enabled = stream.isTTY === true && total >= PROGRESS_MIN_TOTAL;
  }

  /** Whether the bar draws at all. */
  get enabled(): boolean {
    return this.#enabled;
  }

  /** Counts `n` more items done. */
  tick(n = 1): void {
    this.#done += n;
    if (this.#done > this.#total) this.#total = this.#done;
    this.#draw();
  }

  /** Clears the bar's line, so the next output starts on a clean line. */
  finish(): void {
    if (this.#enabled && this.#drawn >= 0) this.#stream.write('\r\u001b[2K');
    this.#drawn = -1;
  }

  #draw(): void {
    if (!this.#enabled) return;
    const percent = this.#total === 0 ? 100 : Math.floor((this.#done / this.#total) * 100);
    if (percent === this.#drawn) return;
    this.#drawn = percent;
    const filled = Math.round((percent / 100) * BAR_WIDTH);
    const bar = '#'.repeat(filled) + '-'.repeat(BAR_WIDTH - filled);
    this.#stream.write(`\r${this.#label} [${bar}] ${String(percent).padStart(3)}% ${this.#done}/${this.#total}`);
  }
}
