/**
 * A pino-compatible logger: each method takes a fields object and a message.
 * redeliver logs nothing unless given one.
 */
export interface Logger {
  debug?(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** The logger used when none is given: silent. */
export const silentLogger: Logger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
