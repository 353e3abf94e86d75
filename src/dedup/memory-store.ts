import type { DedupClaim, DeduplicationStore } from './types.js';

interface Entry {
  readonly handled: boolean;
  /** When handled: the time it was handled. When claimed: the time the claim expires. */
  readonly at: number;
  /** The claim's token (empty once handled). */
  readonly token: string;
}

/** Begins between two sweeps at the least; a sweep also waits for as many begins as entries were left by the last one, so sweeping costs O(1) per begin. */
const MIN_SWEEP_INTERVAL = 1_000;

/**
 * A deduplication store in this process's memory, for tests and
 * single-process use. Ids whose window has passed, and claims that expired
 * without being completed, are swept out as new ids arrive: memory follows
 * the ids seen within one window, not every id ever seen.
 */
export class MemoryDeduplicationStore implements DeduplicationStore {
  readonly #entries = new Map<string, Entry>();
  #nextToken = 0;
  #sinceSweep = 0;
  #leftBySweep = 0;

  /** @param windowMs how long a handled id is remembered (default 24 h). */
  constructor(private readonly windowMs = 24 * 3600_000) {}

  /** Ids remembered or claimed now (expired ones until the next sweep). */
  get size(): number {
    return this.#entries.size;
  }

  async begin(id: string, now: number, leaseMs: number): Promise<DedupClaim> {
    if (++this.#sinceSweep >= Math.max(MIN_SWEEP_INTERVAL, this.#leftBySweep)) this.#sweep(now);
    const entry = this.#entries.get(id);
    if (entry?.handled && !this.#expired(entry, now)) return { outcome: 'duplicate' };
    if (entry && !entry.handled && !this.#expired(entry, now)) return { outcome: 'busy' };
    const token = String(++this.#nextToken);
    this.#entries.set(id, { handled: false, at: now + leaseMs, token });
    return { outcome: 'claimed', token };
  }

  async complete(id: string, _token: string, now: number): Promise<void> {
    this.#entries.set(id, { handled: true, at: now, token: '' });
  }

  async abandon(id: string, token: string): Promise<void> {
    const entry = this.#entries.get(id);
    if (entry && !entry.handled && entry.token === token) this.#entries.delete(id);
  }

  #expired(entry: Entry, now: number): boolean {
    return entry.handled ? entry.at < now - this.windowMs : entry.at <= now;
  }

  #sweep(now: number): void {
    this.#sinceSweep = 0;
    for (const [id, entry] of this.#entries) if (this.#expired(entry, now)) this.#entries.delete(id);
    this.#leftBySweep = this.#entries.size;
  }
}
