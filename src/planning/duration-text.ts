const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Reads a duration written as milliseconds (`1500`) or with a unit
 * (`250ms`, `1.5s`, `2m`, `24h`, `7d`); returns milliseconds, or undefined
 * when `text` is not one.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) return undefined;
  const value = Number(match[1]) * UNITS[match[2] ?? 'ms']!;
  return Number.isFinite(value) ? value : undefined;
}

/**
 * Writes milliseconds readably, in at most two units: `850 ms`, `12.5 s`,
 * `1 min 36 s`, `24 h`, `26 h 5 min`, `3 d 4 h`.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 999.5) return `${Math.round(ms)} ms`;
  if (ms < 59_950) return `${Number((ms / 1_000).toFixed(1))} s`;
  if (ms < 3_600_000) return pair(ms, 60_000, 'min', 1_000, 's');
  if (ms < 2 * 86_400_000) return pair(ms, 3_600_000, 'h', 60_000, 'min');
  return pair(ms, 86_400_000, 'd', 3_600_000, 'h');
}

/** `ms` as whole big units and the rest in whole small units (rounded), the small part left out when 0. */
function pair(ms: number, big: number, bigUnit: string, small: number, smallUnit: string): string {
  const smalls = Math.round(ms / small);
  const perBig = big / small;
  const whole = Math.floor(smalls / perBig);
  const rest = smalls - whole * perBig;
  return rest === 0 ? `${whole} ${bigUnit}` : `${whole} ${bigUnit} ${rest} ${smallUnit}`;
}
