// API key format, generation and hashing. A key is `rk_<env>_<32 hex>`: 128 random
// bits from the system CSPRNG. Only its SHA-256 and a short display prefix are stored.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_ENVS = ['live', 'test'] as const;
export type KeyEnv = (typeof KEY_ENVS)[number];

export const API_KEY_PATTERN = /^rk_(live|test)_[0-9a-f]{32}$/;

/** `rk_live_` plus the first 8 hex characters: enough to tell keys apart in a list. */
const PREFIX_HEX_CHARS = 8;

export function generateApiKey(env: KeyEnv): string {
  return `rk_${env}_${randomBytes(16).toString('hex')}`;
}

/** The environment of a well-formed key, or null when the string is not a key. */
export function parseApiKey(candidate: string): KeyEnv | null {
  const match = API_KEY_PATTERN.exec(candidate);
  return match ? (match[1] as KeyEnv) : null;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function keyPrefix(key: string): string {
  const envEnd = key.indexOf('_', 3) + 1;
  return key.slice(0, envEnd + PREFIX_HEX_CHARS);
}

/** Compares two hex digests without leaking, through timing, where they first differ. */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
