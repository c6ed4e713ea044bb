// Structured logs (pino). Ids travel as fields (log.child({instanceId})), never inside
// message strings; credentials are redacted wherever they might appear. While a request
// is being answered, every line written for it, by the HTTP layer or by the services it
// calls, carries its requestId.
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.ts';

export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  // The console's session id (a cookie) stands for a key.
  'req.headers.cookie',
  'headers.cookie',
  'cookie',
  'api_key',
  '*.api_key',
  'secret',
];

/** The request being answered in this async context; `open` until its response has ended. */
export interface RequestLogContext {
  readonly requestId: string;
  open: boolean;
}

export const requestLogContext = new AsyncLocalStorage<RequestLogContext>();

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // Work a request started that outlives its response (a background command, a
      // timer made on the way) no longer speaks for it.
      mixin(_merge, _level, logger) {
        const context = requestLogContext.getStore();
        if (!context?.open) return {};
        // Request loggers already bind it.
        const bindings = (logger as unknown as Record<symbol, string | undefined>)[pino.symbols.chindingsSym];
        return bindings?.includes('"requestId":') ? {} : { requestId: context.requestId };
      },
    },
    destination,
  );
}
