import { MemoryTransport } from '../../src/transports/memory/index.js';
import { describeTransportConformance } from './suite.js';

describeTransportConformance({
  name: 'memory',
  create: async () => new MemoryTransport(),
  noConnection: 'an in-process transport has no connection to cut',
  limitsWholeMessage: 'an in-process queue has no size limit',
});
