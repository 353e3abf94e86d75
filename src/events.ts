/**
 * A small typed event emitter: each event has one arguments object. A
 * listener that throws is reported to `onListenerError` and never disturbs
 * message handling.
 */
export class TypedEmitter<Events extends object> {
  #listeners = new Map<keyof Events, Set<(args: never) => void>>();

  constructor(private readonly onListenerError: (error: unknown, event: PropertyKey) => void = () => undefined) {}

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: (args: Events[K]) => void): () => void {
    let set = this.#listeners.get(event);
    if (!set) this.#listeners.set(event, (set = new Set()));
    set.add(listener as (args: never) => void);
    return () => this.off(event, listener);
  }

  off<K extends keyof Events>(event: K, listener: (args: Events[K]) => void): void {
    this.#listeners.get(event)?.delete(listener as (args: never) => void);
  }

  /** Whether anyone listens to `event`. */
  has(event: keyof Events): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  protected emit<K extends keyof Events>(event: K, args: Events[K]): void {
    const set = this.#listeners.get(event);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as (a: Events[K]) => void)(args);
      } catch (error) {
        this.onListenerError(error, event);
      }
    }
  }
}
