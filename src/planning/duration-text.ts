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

/** Writes milliseconds in the largest unit that keeps them readable: `850 ms`, `12.5 s`, `4.2 min`, `3.1 h`, `2.5 d`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const abs = Math.abs(ms);
  if (abs < 1_000) return `${round(ms)} ms`;
  if (abs < 60_000) return `${round(ms / 1_000)} s`;
  if (abs < 3_600_000) return `${round(ms / 60_000)} min`;
  if (abs < 86_400_000) return `${round(ms / 3_600_000)} h`;
  return `${round(ms / 86_400_000)} d`;
}

function round(n: number): string {
  return String(Number(n.toFixed(n >= 100 || n <= -100 ? 0 : 1)));
}
