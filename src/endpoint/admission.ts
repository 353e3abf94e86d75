/**
 * Decides when a delivery the endpoint holds may run: at most `limit` at
 * once, and never two with the same message id at once. A transport may hand
 * out more than the prefetch (RabbitMQ after a reconnection redelivers what
 * the old channel's handlers are still running); the extra deliveries wait
 * here, already leased to the endpoint, until a slot frees, and a copy of a
 * message being handled waits for that handler to finish. Flow control may
 * lower the limit (to 0 while the consumer backs off, to 1 while it probes):
 * a delivery the transport hands out before its pause takes effect waits
 * here too. No timer: a slot is handed on when a handler finishes or the
 * limit rises.
 */
export class Admission<D extends { readonly id: string }> {
  #running = 0;
  #held = 0;
  /** Deliveries waiting for a slot, oldest first. */
  #queued: D[] = [];
  /** Ids being handled, each with the copies waiting for its handler (null while there are none). */
  readonly #busy = new Map<string, D[] | null>();

  /**
   * @param limit the most deliveries running at once.
   * @param start runs a delivery; `finished` must be called once it is done.
   */
  constructor(
    private limit: number,
    private readonly start: (delivery: D) => void,
  ) {}

  /** Changes the most deliveries running at once; a higher limit starts waiting deliveries at once. */
  setLimit(limit: number): void {
    this.limit = limit;
    this.#startWaiting();
  }

  /** Deliveries held: running, and waiting for a slot or for their id. */
  get held(): number {
    return this.#held;
  }

  /** A delivery arrived: it runs now, or waits. */
  admit(delivery: D): void {
    this.#held++;
    if (this.#busy.has(delivery.id)) this.#waitForId(delivery);
    else if (this.#running < this.limit) this.#run(delivery);
    else this.#queued.push(delivery);
  }

  /**
   * The delivery `admit` started is done (settled or released); its slot
   * goes to the next one: a copy of the same id first, then the oldest
   * waiting. The copies wait at the head of the queue while the limit
   * leaves no slot.
   */
  finished(delivery: D): void {
    this.#running--;
    this.#held--;
    const sameId = this.#busy.get(delivery.id);
    this.#busy.delete(delivery.id);
    if (sameId) this.#queued.unshift(...sameId);
    this.#startWaiting();
  }

  #startWaiting(): void {
    while (this.#running < this.limit && this.#queued.length > 0) {
      const waiting = this.#queued.shift()!;
      if (this.#busy.has(waiting.id)) this.#waitForId(waiting);
      else this.#run(waiting);
    }
  }

  /** Takes every waiting delivery out, to hand back; each still counts as held until {@link left}. */
  takeWaiting(): D[] {
    const taken = this.#queued.splice(0);
    for (const [id, copies] of this.#busy) {
      if (copies) {
        taken.push(...copies);
        this.#busy.set(id, null);
      }
    }
    return taken;
  }

  /** A delivery from {@link takeWaiting} was handed back. */
  left(): void {
    this.#held--;
  }

  #run(delivery: D): void {
    this.#running++;
    this.#busy.set(delivery.id, null);
    this.start(delivery);
  }

  #waitForId(delivery: D): void {
    const copies = this.#busy.get(delivery.id);
    if (copies) copies.push(delivery);
    else this.#busy.set(delivery.id, [delivery]);
  }
}
