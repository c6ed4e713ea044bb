// The operator's list of organizations: each one with its live instances (in rooms, on
// every node; warm pool instances are the pools' own) and its keys not revoked, by name,
// a page at a time.
import type { Db } from '../store/db.ts';
import { LIVE_STATES } from './lifecycle.ts';
import { afterCursor, pageOf } from './page-cursor.ts';

export interface OrganizationOverview {
  organization_id: string;
  name: string;
  created_at: string;
  live_instances: number;
  keys: number;
}

export async function listOrganizations(db: Db, options: { limit: number; cursor?: string | undefined }): Promise<{ organizations: OrganizationOverview[]; next_cursor: string | null }> {
  let query = db.selectFrom('organizations').selectAll().orderBy('name').orderBy('id').limit(options.limit + 1);
  if (options.cursor !== undefined) query = query.where(afterCursor(options.cursor, 'name', 'asc'));
  const { page, nextCursor } = pageOf(await query.execute(), options.limit, (row) => row.name);
  const ids = page.map((row) => row.id);
  const live = new Map<string, number>();
  const keys = new Map<string, number>();
  if (ids.length > 0) {
    const instances = await db
      .selectFrom('instances')
      .select(['organization_id', ({ fn }) => fn.countAll<number>().as('n')])
      .where('organization_id', 'in', ids)
      .where('state', 'in', LIVE_STATES)
      .where('warm_pool_key', 'is', null)
      .groupBy('organization_id')
      .execute();
    for (const row of instances) live.set(row.organization_id, Number(row.n));
    const active = await db
      .selectFrom('api_keys')
      .select(['organization_id', ({ fn }) => fn.countAll<number>().as('n')])
      .where('organization_id', 'in', ids)
      .where('revoked_at', 'is', null)
      .groupBy('organization_id')
      .execute();
    for (const row of active) keys.set(row.organization_id, Number(row.n));
  }
  return {
    organizations: page.map((row) => ({ organization_id: row.id, name: row.name, created_at: row.created_at, live_instances: live.get(row.id) ?? 0, keys: keys.get(row.id) ?? 0 })),
    next_cursor: nextCursor,
  };
}
