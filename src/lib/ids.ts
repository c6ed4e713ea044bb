// The forms of the ids the API takes. Room ids are chosen by callers and travel in URL
// paths and host-side names, so they keep to characters that need no escaping anywhere;
// every other id is a UUID the service made.
import { randomBytes } from 'node:crypto';

/** 1-128 of A-Z a-z 0-9 . _ -, but not `.` or `..`, which paths and URLs treat specially. */
export const ROOM_ID_PATTERN = '^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$';

/** A UUID in its usual text form, either case (as JSON Schema `pattern`). */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const UUID = new RegExp(UUID_PATTERN);

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

let lastV7Ms = 0;
let v7Sequence = 0;

/**
 * A UUID version 7 for the time `ms`: its text sorts by time, and ids made in this
 * process sort in the order they were made (a 12-bit sequence orders those of one
 * millisecond; past 4096 of them the time part moves on a millisecond).
 */
export function timeOrderedUuid(ms: number = Date.now()): string {
  if (ms > lastV7Ms) {
    lastV7Ms = ms;
    v7Sequence = 0;
  } else if (++v7Sequence > 0xfff) {
    lastV7Ms += 1;
    v7Sequence = 0;
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(lastV7Ms, 0, 6);
  bytes[6] = 0x70 | (v7Sequence >> 8);
  bytes[7] = v7Sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
