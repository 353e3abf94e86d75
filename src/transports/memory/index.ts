export { MemoryTransport, AlreadySettledError, type MemoryTransportOptions } from './memory-transport.js';
