/**
 * Typed messages on a real transport with a fake clock: the handler gets the
 * schema's output; a body the schema refuses, or whose validator throws,
 * goes to the error queue at once with reason `validation`.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { HEADER, LIMITS } from '../../src/headers/names.js';
import { drain, sendJson, startEndpoint, type TransportFactory } from '../support/engine-harness.js';

const Order = z.object({
  id: z.string(),
  lines: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })),
  placedAt: z.iso.datetime().transform((s) => new Date(s)),
  priority: z.enum(['low', 'high']).default('low'),
});
type Order = z.output<typeof Order>;

const validOrder = { id: 'A-1', lines: [{ sku: 'tea', qty: 2 }], placedAt: '2026-01-01T09:30:00Z' };

/** A Standard Schema written by hand, no library: `{ n }` with n a number, answered at once or with a promise. */
function handWritten(answer: 'at once' | 'promise'): StandardSchemaV1<unknown, { n: number; doubled: number }> {
  return {
    '~standard': {
      version: 1,
      vendor: 'hand-written',
      validate: (value) => {
        const n = (value as { n?: unknown } | null)?.n;
        const result: StandardSchemaV1.Result<{ n: number; doubled: number }> =
          typeof n === 'number' ? { value: { n, doubled: n * 2 } } : { issues: [{ message: 'must be a number', path: [{ key: 'n' }] }] };
        return answer === 'at once' ? result : Promise.resolve(result);
      },
    },
  };
}

interface IssuesHeader {
  issues: { path: (string | number)[]; message: string }[];
  dropped: number;
}

function issuesOf(headers: Readonly<Record<string, string>>): IssuesHeader {
  return JSON.parse(headers[HEADER.validationIssues]!) as IssuesHeader;
}

export function describeSchema(name: string, factory: TransportFactory): void {
  describe(`typed messages on ${name}`, () => {
    it("hands the handler the schema's output: transforms applied, defaults filled in", async () => {
      const got: Order[] = [];
      const h = await startEndpoint(factory, { schema: Order, handler: (order) => void got.push(order) });
      await sendJson(h.transport, 'orders', 'm-1', validOrder);
      await h.until(1);
      expect(got).toEqual([{ ...validOrder, placedAt: new Date('2026-01-01T09:30:00Z'), priority: 'low' }]);
      expect(got[0]!.placedAt).toBeInstanceOf(Date);
      expect(h.endpoint.stats.handled).toBe(1);
      await h.close();
    });

    it('sends a body the schema refuses to the error queue at once, with the issues in a header', async () => {
      let calls = 0;
      const h = await startEndpoint(factory, { schema: Order, handler: () => void calls++ });
      await sendJson(h.transport, 'orders', 'bad-1', { id: 7, lines: [{ sku: 'tea', qty: 0 }], placedAt: 'yesterday' }, { 'x-tenant': 'acme' });
      await h.until(1);
      expect(calls).toBe(0);
      expect(h.endpoint.stats).toMatchObject({ deadLettered: 1, immediateRetries: 0, delayedRetries: 0 });
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.id).toBe('bad-1');
      expect(dead!.headers[HEADER.failureReason]).toBe('validation');
      expect(dead!.headers[HEADER.failureErrorName]).toBe('ValidationError');
      expect(dead!.headers[HEADER.failureAttempts]).toBe('0');
      expect(dead!.headers['x-tenant']).toBe('acme');
      const { issues, dropped } = issuesOf(dead!.headers);
      expect(dropped).toBe(0);
      expect(issues.map((i) => i.path)).toEqual([['id'], ['lines', 0, 'qty'], ['placedAt']]);
      for (const issue of issues) expect(issue.message).not.toBe('');
      expect(dead!.headers[HEADER.failureMessage]).toMatch(/^the body failed its schema \(3 issues\): id: .+; lines\[0\]\.qty: .+; placedAt: .+$/);
      await h.close();
    });

    it('bounds the issues header: at most 20 issues within 4 KiB, counting those dropped', async () => {
      const Many = z.object({ items: z.array(z.object({ qty: z.number() })) });
      const h = await startEndpoint(factory, { schema: Many, handler: () => undefined });
      await sendJson(h.transport, 'orders', 'many', { items: Array.from({ length: 50 }, () => ({ qty: 'x' })) });
      const Long = z.object({ note: z.string().refine(() => false, { message: 'é'.repeat(5_000) }) });
      await h.until(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      const { issues, dropped } = issuesOf(dead!.headers);
      expect(issues).toHaveLength(LIMITS.validationIssues);
      expect(dropped).toBe(30);
      expect(issues[19]!.path).toEqual(['items', 19, 'qty']);
      expect(Buffer.byteLength(dead!.headers[HEADER.validationIssues]!)).toBeLessThanOrEqual(LIMITS.validationIssuesBytes);
      await h.close();

      const long = await startEndpoint(factory, { schema: Long, handler: () => undefined });
      for (let i = 0; i < 3; i++) await sendJson(long.transport, 'orders', `long-${i}`, { note: 'hi' });
      await long.until(3);
      for (const copy of await drain(long.transport, 'error', long.clock, 3)) {
        const header = copy.headers[HEADER.validationIssues]!;
        expect(Buffer.byteLength(header)).toBeLessThanOrEqual(LIMITS.validationIssuesBytes);
        expect(issuesOf(copy.headers).issues[0]!.message).toHaveLength(LIMITS.validationIssueMessageChars);
      }
      await long.close();
    });

    it('a validator that throws or rejects sends the message to the error queue, and the endpoint goes on', async () => {
      const throwing: StandardSchemaV1<unknown, { ok: true }> = {
        '~standard': {
          version: 1,
          vendor: 'hand-written',
          validate: (value) => {
            const mode = (value as { mode?: string }).mode;
            if (mode === 'throw') throw new RangeError('validator exploded');
            if (mode === 'reject') return Promise.reject(new SyntaxError('validator rejected'));
            if (mode === 'garbage') return null as unknown as StandardSchemaV1.Result<{ ok: true }>;
            return { value: { ok: true } };
          },
        },
      };
      const handled: string[] = [];
      const h = await startEndpoint(factory, { schema: throwing, handler: (_m, ctx) => void handled.push(ctx.messageId) });
      for (const mode of ['throw', 'reject', 'garbage', 'fine']) await sendJson(h.transport, 'orders', mode, { mode });
      await h.until(4);
      expect(handled).toEqual(['fine']);
      expect(h.endpoint.stats).toMatchObject({ handled: 1, deadLettered: 3, immediateRetries: 0, delayedRetries: 0 });
      const dead = await drain(h.transport, 'error', h.clock, 3);
      const byId = Object.fromEntries(dead.map((d) => [d.id, d.headers]));
      expect(byId['throw']![HEADER.failureReason]).toBe('validation');
      expect(byId['throw']![HEADER.failureErrorName]).toBe('RangeError');
      expect(byId['throw']![HEADER.failureMessage]).toBe('validator exploded');
      expect(byId['reject']![HEADER.failureErrorName]).toBe('SyntaxError');
      expect(byId['reject']![HEADER.failureReason]).toBe('validation');
      expect(byId['garbage']![HEADER.failureErrorName]).toBe('TypeError');
      expect(byId['garbage']![HEADER.failureReason]).toBe('validation');
      for (const headers of Object.values(byId)) expect(headers[HEADER.validationIssues]).toBeUndefined();
      await h.close();
    });

    it('waits for an asynchronous validator (a zod async refinement)', async () => {
      const known = new Set(['tea', 'coffee']);
      const Async = z.object({ sku: z.string().refine(async (sku) => known.has(sku), { message: 'unknown sku' }) });
      const got: unknown[] = [];
      const h = await startEndpoint(factory, { schema: Async, handler: (m) => void got.push(m) });
      await sendJson(h.transport, 'orders', 'ok', { sku: 'tea' });
      await sendJson(h.transport, 'orders', 'nope', { sku: 'gravel' });
      await h.until(2);
      expect(got).toEqual([{ sku: 'tea' }]);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.id).toBe('nope');
      expect(issuesOf(dead!.headers).issues).toEqual([{ path: ['sku'], message: 'unknown sku' }]);
      await h.close();
    });

    it.each(['at once', 'promise'] as const)('works with a hand-written Standard Schema answering %s', async (answer) => {
      const got: unknown[] = [];
      const h = await startEndpoint(factory, { schema: handWritten(answer), handler: (m) => void got.push(m) });
      await sendJson(h.transport, 'orders', 'good', { n: 21 });
      await sendJson(h.transport, 'orders', 'bad', { n: 'twenty' });
      await h.until(2);
      expect(got).toEqual([{ n: 21, doubled: 42 }]);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.headers[HEADER.failureReason]).toBe('validation');
      expect(issuesOf(dead!.headers)).toEqual({ issues: [{ path: ['n'], message: 'must be a number' }], dropped: 0 });
      await h.close();
    });

    it('an undecodable body is still a deserialization failure, before the schema runs', async () => {
      let validations = 0;
      const counting: StandardSchemaV1<unknown, unknown> = {
        '~standard': { version: 1, vendor: 'hand-written', validate: (value) => (validations++, { value }) },
      };
      const h = await startEndpoint(factory, { schema: counting, handler: () => undefined });
      await h.transport.send('orders', { id: 'junk', body: new TextEncoder().encode('{not json'), headers: {} });
      await h.until(1);
      expect(validations).toBe(0);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.headers[HEADER.failureReason]).toBe('deserialization');
      await h.close();
    });
  });
}
