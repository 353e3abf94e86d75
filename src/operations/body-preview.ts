/** A message body as an operator sees it: text when it is valid UTF-8, otherwise a hex dump. */
export interface BodyPreview {
  readonly encoding: 'utf8' | 'hex';
  /** The shown part: the text itself, or a hex dump with offsets, 16 bytes a line. */
  readonly text: string;
  /** The body's full size in bytes. */
  readonly size: number;
  /** Bytes shown. */
  readonly shownBytes: number;
  /** Whether the body is longer than what is shown. */
  readonly truncated: boolean;
}

/**
 * The first `maxBytes` bytes of a body, as text when they are valid UTF-8
 * without control characters other than tab and line breaks (a character
 * cut by the limit does not make it binary), otherwise as a hex dump.
 */
export function bodyPreview(body: Uint8Array, maxBytes: number): BodyPreview {
  const shown = body.subarray(0, Math.max(0, maxBytes));
  const truncated = body.length > shown.length;
  const text = utf8(shown, truncated);
  if (text !== undefined && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) {
    return { encoding: 'utf8', text, size: body.length, shownBytes: shown.length, truncated };
  }
  return { encoding: 'hex', text: hexDump(shown), size: body.length, shownBytes: shown.length, truncated };
}

/** The bytes as a string when they are valid UTF-8 (with `partial`, a character cut at the end is allowed and dropped). */
export function utf8(bytes: Uint8Array, partial = false): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes, { stream: partial });
  } catch {
    return undefined;
  }
}

function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    const row = bytes.subarray(offset, offset + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}
