import { describe, expect, it } from 'vitest';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { OptionError } from '../../src/util/option-checks.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { describeSchema } from './schema-suite.js';

describeSchema('memory', (clock) => new MemoryTransport({ clock }));

describe('the schema option', () => {
  it('must be a Standard Schema', () => {
    const transport = new MemoryTransport();
    for (const schema of [{ parse: () => 1 }, { '~standard': { version: 1 } }, 'Order', null]) {
      expect(() => new Endpoint({ name: 'orders', transport, schema: schema as unknown as StandardSchemaV1, handler: () => undefined })).toThrow(OptionError);
    }
  });
});
