import { describe, expect, it } from 'vitest';
import { summarizeError } from '../../src/headers/failure.js';
import { LIMITS } from '../../src/headers/names.js';
import { HOSTILE_VALUES } from '../support/hostile-values.js';

describe('summarizeError', () => {
  it.each(HOSTILE_VALUES)('describes %s, bounded, without throwing', (_name, make) => {
    const summary = summarizeError(make());
    expect(typeof summary.name).toBe('string');
    expect(summary.name.length).toBeGreaterThan(0);
    expect(summary.name.length).toBeLessThanOrEqual(200);
    expect(summary.message.length).toBeLessThanOrEqual(LIMITS.messageChars);
    expect(summary.stack.length).toBeLessThanOrEqual(LIMITS.stackChars);
  });

  it('names the getter that threw instead of its value', () => {
    const [, make] = HOSTILE_VALUES.find(([name]) => name === 'an object with throwing getters')!;
    expect(summarizeError(make())).toEqual({ name: 'Error', message: '[object with a throwing getter]', stack: '' });
  });

  it('describes a Proxy that throws on every trap without converting it', () => {
    const [, make] = HOSTILE_VALUES.find(([name]) => name === 'a Proxy that throws on every trap')!;
    expect(summarizeError(make())).toEqual({ name: 'NonError', message: '[object with a throwing getter]', stack: '' });
  });

  it('replaces lone surrogates, also one left by the cut, so every transport can encode the summary', () => {
    const summary = summarizeError(new Error(`${'a'.repeat(LIMITS.messageChars - 2)}\u{1F600}\uD800 end`));
    expect(() => encodeURIComponent(summary.message)).not.toThrow();
    expect(() => encodeURIComponent(summarizeError(new Error('\uDC00')).message)).not.toThrow();
  });

  it('keeps what an ordinary value says', () => {
    expect(summarizeError(new TypeError('bad'))).toMatchObject({ name: 'TypeError', message: 'bad' });
    expect(summarizeError(null)).toEqual({ name: 'NonError', message: 'null', stack: '' });
    expect(summarizeError(Symbol('s'))).toEqual({ name: 'NonError', message: 'Symbol(s)', stack: '' });
    expect(summarizeError({ message: 42 })).toEqual({ name: 'Error', message: '42', stack: '' });
  });
});
