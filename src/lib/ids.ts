// The forms of the ids the API takes. Room ids are chosen by callers and travel in URL
// paths and host-side names, so they keep to characters that need no escaping anywhere;
// every other id is a UUID the service made.

/** 1-128 of A-Z a-z 0-9 . _ -, but not `.` or `..`, which paths and URLs treat specially. */
export const ROOM_ID_PATTERN = '^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$';

/** A UUID in its usual text form, either case (as JSON Schema `pattern`). */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const UUID = new RegExp(UUID_PATTERN);

export function isUuid(value: string): boolean {
  return UUID.test(value);
}
