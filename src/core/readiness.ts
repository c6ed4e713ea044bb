// Whether the service can do its work now, for a load balancer or an orchestrator's
// readiness probe: the store answers a query, and an instance runtime is available.
// (Liveness is /healthz, which answers while the process runs.)
import { sql } from 'kysely';
import type { RuntimeSelection } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';

export interface Readiness {
  ready: boolean;
  store: { ok: true } | { ok: false; reason: string };
  runtime: { ok: true; name: string } | { ok: false; reason: string };
}

export async function checkReadiness(db: Db, runtime: RuntimeSelection): Promise<Readiness> {
  let store: Readiness['store'];
  try {
    await sql`select 1`.execute(db);
    store = { ok: true };
  } catch (err) {
    store = { ok: false, reason: `the store does not answer: ${err instanceof Error ? err.message : String(err)}` };
  }
  const runtimeState: Readiness['runtime'] =
    'runtime' in runtime ? { ok: true, name: runtime.runtime.name } : { ok: false, reason: runtime.unavailable.reason };
  return { ready: store.ok && runtimeState.ok, store, runtime: runtimeState };
}
