/**
 * One holder at a time per key: whoever asks for a key runs after every
 * earlier holder of the same key has finished, in the order they asked.
 * Keys nobody holds take no memory.
 */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `fn` once every earlier holder of `key` has finished, holding `key` until `fn` settles. */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const unlock = await this.acquire(key);
    try {
      return await fn();
    } finally {
      unlock();
    }
  }

  /** Waits for every earlier holder of `key`; resolves the function that lets the next one run. */
  async acquire(key: string): Promise<() => void> {
    let unlock!: () => void;
    const held = new Promise<void>((resolve) => (unlock = resolve));
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const tail = previous.then(() => held);
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    await previous;
    return unlock;
  }
}
