// Structured logs (pino). Ids travel as fields (log.child({instanceId})), never inside
// message strings; credentials are redacted wherever they might appear.
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.ts';

export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'api_key',
  '*.api_key',
  'secret',
];

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}
