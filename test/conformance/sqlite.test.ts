import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { describeTransportConformance } from './suite.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-sqlite-conformance-'));
let files = 0;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeTransportConformance({
  name: 'sqlite',
  create: async () => new SqliteTransport({ path: join(dir, `store-${++files}.db`) }),
  noConnection: 'a local file has no connection to cut',
  limitsWholeMessage: 'a local file has no size limit',
});
