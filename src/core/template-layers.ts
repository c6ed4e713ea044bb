// Which template layers can go: the cache of builds grows with every step that ran, and
// a layer is a copy of a build sandbox's files, so `roomkit images prune` removes the
// layers of this node that no template's image starts from. What goes is only cache: a
// later build runs those steps again. A layer younger than a build's time limit stays,
// since a build (or a create from a template just rebuilt) may be using it.
import type { Db } from '../store/db.ts';
import { BUILD_TIME_LIMIT_MS, type TemplateResult } from './template-builder.ts';

/** This node's layers that no live template's image uses, made longer ago than a build may take. */
export async function unusedTemplateLayers(db: Db, nodeId: string, now: number = Date.now()): Promise<string[]> {
  const images = await db
    .selectFrom('templates')
    .innerJoin('template_builds', 'template_builds.id', 'templates.ready_build_id')
    .select('template_builds.result')
    .where('templates.deleted_at', 'is', null)
    .execute();
  const used = new Set(images.map((r) => (r.result === null ? null : (JSON.parse(r.result) as TemplateResult).layer_id)).filter((id): id is string => id !== null));
  const before = new Date(now - BUILD_TIME_LIMIT_MS).toISOString();
  const old = await db.selectFrom('template_layers').select('layer_id').where('node_id', '=', nodeId).where('created_at', '<', before).execute();
  return old.map((r) => r.layer_id).filter((id) => !used.has(id));
}

/** Forgets layers whose files were removed. */
export async function forgetTemplateLayers(db: Db, layerIds: readonly string[]): Promise<void> {
  if (layerIds.length > 0) await db.deleteFrom('template_layers').where('layer_id', 'in', layerIds).execute();
}
