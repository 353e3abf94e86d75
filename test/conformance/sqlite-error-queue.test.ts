import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-eq-'));
let n = 0;
describeErrorQueueConformance({ name: 'sqlite', create: async () => new SqliteTransport({ path: join(dir, `eq-${n++}.db`) }) });
