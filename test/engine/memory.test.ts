import { MemoryTransport } from '../../src/transports/memory/index.js';
import { describeRecoverability } from './recoverability-suite.js';

describeRecoverability('memory', (clock) => new MemoryTransport({ clock }));
