// The cursor of a paged list (instances, a room's commands): the sort key and id of the
// last item served, opaque to callers, so the next page starts right after it even when
// items were added in between.
import { AppError } from '../errors.ts';

export function encodeCursor(sortKey: string, id: string): string {
  return Buffer.from(JSON.stringify([sortKey, id])).toString('base64url');
}

/** The sort key and id a cursor carries; invalid_cursor for anything this server did not give out. */
export function decodeCursor(cursor: string): [string, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string')) {
      return [value[0] as string, value[1] as string];
    }
  } catch {
    // fall through to the error below
  }
  throw new AppError('invalid_cursor', 'cursor is not one this server gave out; start again without it');
}
