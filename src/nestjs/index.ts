/**
 * `redeliver/nestjs`: redeliver in a Nest application. `RedeliverModule`
 * runs an endpoint for every `@Handle` provider method and provides
 * producers; `nesbusRetry` carries nesbus `SbBackoffRetry` settings over.
 * Needs `@nestjs/common` and `@nestjs/core` (optional peers). Usage in
 * docs/nestjs.md.
 */
export { RedeliverModule } from './module.js';
export { RedeliverEndpoints, type HandlerEndpoint } from './endpoints.js';
export { Handle, type HandleOptions, type HandlerSettings } from './handle.js';
export { InjectProducer, InjectTransport, producerToken, transportToken } from './tokens.js';
export type { RedeliverModuleOptions, RedeliverModuleAsyncOptions, RedeliverModuleScope } from './options.js';
export { nesbusRetry, type NesbusRetryOptions, type NesbusDelayType } from './nesbus-retry.js';
