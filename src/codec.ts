import { DeserializationError } from './policy/errors.js';

/** Turns message bodies into values and back. */
export interface Codec<T> {
  encode(value: T): Uint8Array;
  /** Throws when the bytes are not a valid body; the message then skips every retry. */
  decode(bytes: Uint8Array): T;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 JSON, the default codec. */
export const jsonCodec: Codec<unknown> = {
  encode: (value) => {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('jsonCodec: the value has no JSON form');
    return encoder.encode(text);
  },
  decode: (bytes) => {
    try {
      return JSON.parse(decoder.decode(bytes)) as unknown;
    } catch (error) {
      throw new DeserializationError(`body is not valid UTF-8 JSON: ${(error as Error).message}`, { cause: error });
    }
  },
};

/** Bodies as raw bytes, untouched. */
export const bytesCodec: Codec<Uint8Array> = {
  encode: (value) => value,
  decode: (bytes) => bytes,
};
