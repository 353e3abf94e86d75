import { MemoryTransport } from '../../src/transports/memory/index.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

describeErrorQueueConformance({ name: 'memory', create: async () => new MemoryTransport() });
