// The cursor of a paged list (instances, a room's commands, snapshots, the audit trail): the sort key and id of the
// last item served, opaque to callers, so the next page starts right after it even when
// items were added in between.
// afterCursor() and pageOf() are the two halves every such list shares.
import { type ExpressionBuilder, sql } from 'kysely';
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

/**
 * The rows after a cursor in a list ordered by `column` then `id`, both descending (or
 * both ascending: `order`): the condition for the query's where(). `column` is the sort
 * key the cursor was made from.
 */
export function afterCursor(cursor: string, column: string, order: 'desc' | 'asc' = 'desc') {
  const [key, id] = decodeCursor(cursor);
  const sortKey = sql.ref(column);
  const rowId = sql.ref('id');
  const after = order === 'desc' ? '<' : '>';
  return (eb: ExpressionBuilder<any, any>) => eb.or([eb(sortKey, after, key), eb.and([eb(sortKey, '=', key), eb(rowId, after, id)])]);
}

/**
 * A page of a list queried with limit + 1 rows: the first `limit`, and the cursor of the
 * next page (null when that extra row was not there: this page is the last).
 */
export function pageOf<T extends { id: string }>(rows: T[], limit: number, sortKey: (row: T) => string): { page: T[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, nextCursor: rows.length > limit && last ? encodeCursor(sortKey(last), last.id) : null };
}
