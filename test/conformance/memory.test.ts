import { MemoryTransport } from '../../src/transports/memory/index.js';
import { describeTransportConformance } from './suite.js';

describeTransportConformance({ name: 'memory', create: async () => new MemoryTransport() });
