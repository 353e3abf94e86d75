import type { DedupClaim, DeduplicationStore } from './types.js';

/** A deduplication store in this process's memory, for tests and single-process use. */
export class MemoryDeduplicationStore implements DeduplicationStore {
  readonly #entries = new Map<string, { handled: boolean; at: number }>();

  /** @param windowMs how long a handled id is remembered (default 24 h). */
  constructor(private readonly windowMs = 24 * 3600_000) {}

  async begin(id: string, now: number, leaseMs: number): Promise<DedupClaim> {
    const entry = this.#entries.get(id);
    if (entry?.handled && entry.at >= now - this.windowMs) return 'duplicate';
    if (entry && !entry.handled && entry.at > now) return 'busy';
    this.#entries.set(id, { handled: false, at: now + leaseMs });
    return 'claimed';
  }

  async complete(id: string, now: number): Promise<void> {
    this.#entries.set(id, { handled: true, at: now });
  }

  async abandon(id: string): Promise<void> {
    if (this.#entries.get(id)?.handled === false) this.#entries.delete(id);
  }
}
