/**
 * Parameter checks shared by every backoff constructor. A bad parameter fails
 * when the strategy is built, with a RangeError naming the function and the
 * parameter, rather than as a strange delay at the first retry hours later.
 * Infinity is accepted only where a parameter is a cap (`maxMs`).
 */

function reject(owner: string, name: string, rule: string, value: unknown): never {
  throw new RangeError(`${owner}: ${name} must be ${rule}, got ${String(value)}`);
}

/**
 * Requires a finite delay: `0 ≤ value < Infinity`.
 * @param owner the function being built, shown in the message (required).
 * @param name the parameter checked, shown in the message (required).
 * @param value the value to check (required).
 */
export function checkDelay(owner: string, name: string, value: number): void {
  if (!(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
    reject(owner, name, 'a finite number of milliseconds >= 0', value);
  }
}

/**
 * Requires a cap on a delay: `0 ≤ value ≤ Infinity`, where Infinity means no cap.
 * @param owner the function being built, shown in the message (required).
 * @param name the parameter checked, shown in the message (required).
 * @param value the value to check (required).
 */
export function checkMax(owner: string, name: string, value: number): void {
  if (!(typeof value === 'number' && value >= 0)) {
    reject(owner, name, 'a number of milliseconds >= 0 (Infinity for no cap)', value);
  }
}

/**
 * Requires a growth factor: `1 ≤ value < Infinity`, so delays never shrink.
 * @param owner the function being built, shown in the message (required).
 * @param name the parameter checked, shown in the message (required).
 * @param value the value to check (required).
 */
export function checkMultiplier(owner: string, name: string, value: number): void {
  if (!(typeof value === 'number' && Number.isFinite(value) && value >= 1)) {
    reject(owner, name, 'a finite number >= 1', value);
  }
}

/**
 * Requires a value in a closed range: `min ≤ value ≤ max`.
 * @param owner the function being built, shown in the message (required).
 * @param name the parameter checked, shown in the message (required).
 * @param value the value to check (required).
 * @param min the lowest value allowed (required).
 * @param max the highest value allowed (required).
 */
export function checkBetween(owner: string, name: string, value: number, min: number, max: number): void {
  if (!(typeof value === 'number' && value >= min && value <= max)) {
    reject(owner, name, `a number from ${min} to ${max}`, value);
  }
}

/**
 * Requires a whole number of at least `min`: `value ∈ {min, min + 1, ...}`.
 * @param owner the function being built, shown in the message (required).
 * @param name the parameter checked, shown in the message (required).
 * @param value the value to check (required).
 * @param min the lowest value allowed (required).
 */
export function checkWholeNumber(owner: string, name: string, value: number, min: number): void {
  if (!(typeof value === 'number' && Number.isInteger(value) && value >= min)) {
    reject(owner, name, `a whole number >= ${min}`, value);
  }
}
