// Reconciliation at start: the store is the record, and what exists on the host is
// made to agree with it. Ready instances whose machine still runs and answers are
// adopted; everything the runtime holds for any other instance is removed (including
// what stopped instances still held when a crash interrupted their release in the
// background); then each other live instance is recorded as stopped (its stop was under
// way) or failed, with why. Paused instances stay paused; one whose pause or resume a
// crash interrupted is paused again (the runtime's pause() finishes or undoes what was
// half done), so it is never left half running.
import type { Logger } from 'pino';
import type { Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { liveInstances } from './instance-queries.ts';
import type { InstanceRecord } from './stored-json.ts';
import type { EndReason, InstanceRecords } from './instance-records.ts';
import { PAUSE_STATES } from './lifecycle.ts';

/** Paused instances settled at once at a start. */
const PAUSES_AT_ONCE = 8;

export interface Reconciled {
  adopted: string[];
  /** Paused instances kept (those whose pause or resume was interrupted included). */
  paused: string[];
  failed: string[];
  stopped: string[];
  swept: string[];
}

/**
 * Makes the host agree with the store after a start: ready instances that still run
 * are adopted; whatever the runtime holds for any other instance is removed; then
 * instances that were being deleted are recorded as stopped, and every other live
 * one (half-made, or found dead) as failed, with the reason.
 */
export async function reconcileWithHost(deps: { db: Db; nodeId: string; records: InstanceRecords; runtime: Runtime; log: Logger }): Promise<Reconciled> {
  const { db, records, runtime, log } = deps;
  // Only this node's: the others' instances run on their own hosts.
  const rows = await liveInstances(db, deps.nodeId);
  const adopted: string[] = [];
  const paused: string[] = [];
  const outcomes: { row: InstanceRecord; to: 'failed' | 'stopped'; why: EndReason }[] = [];
  const toPause: InstanceRecord[] = [];
  for (const row of rows) {
    if (row.state === 'ready' && row.runtime === runtime.name) {
      const health = await runtime.health(row.id);
      if (health.healthy) {
        await runtime.adopt(row.id);
        adopted.push(row.id);
        log.info({ instanceId: row.id }, 'instance adopted at start');
        continue;
      }
      outcomes.push({ row, to: 'failed', why: { reason: `found unhealthy at service start: ${health.reason}`, code: 'host_lost' } });
    } else if ((PAUSE_STATES as readonly string[]).includes(row.state) && row.runtime === runtime.name && runtime.pause) {
      toPause.push(row);
    } else if (row.state === 'stopping') {
      // Its stop was under way: it ends for the same reason, now that it is done.
      const stopping = await records.lastEndReason(row.id);
      outcomes.push({
        row,
        to: 'stopped',
        why: { ...(stopping ?? { code: 'service_stopped' }), reason: 'stopped when the service started again' },
      });
    } else {
      outcomes.push({ row, to: 'failed', why: { reason: `the service stopped while the instance was ${row.state}`, code: 'service_stopped' } });
    }
  }
  // Paused instances, and those a crash caught pausing or resuming, are paused (again):
  // whatever of a machine was left is stopped and released, the layer is kept. A few at
  // a time: each is a handful of host programs even when nothing is left.
  const pauseOne = async (row: InstanceRecord) => {
    try {
      const outcome = await runtime.pause!(row.id, { memory: true });
      // What the runtime holds now is what a resume will find (a saved memory a crash cut short is not kept).
      if (row.paused_at === null) await records.recordPause(row.id, outcome.memoryKept);
      else if ((row.paused_memory_kept === 1) !== outcome.memoryKept) await records.recordMemoryKept(row.id, outcome.memoryKept);
      if (row.state !== 'paused') {
        await records.transition(row.id, 'paused', { reason: `the service stopped while the instance was ${row.state}; it was paused when the service started again`, code: 'service_stopped' });
        log.warn({ instanceId: row.id, was: row.state }, 'instance settled as paused at start');
      }
      paused.push(row.id);
    } catch (err) {
      outcomes.push({ row, to: 'failed', why: { reason: `could not be paused at service start: ${(err as Error).message}`, code: 'host_lost' } });
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(PAUSES_AT_ONCE, toPause.length) }, async () => {
      for (let row = toPause.shift(); row; row = toPause.shift()) await pauseOne(row);
    }),
  );
  // Remove first, record after: a row says `stopped` or `failed` only once nothing of
  // it is left on the host.
  let swept: string[] = [];
  try {
    swept = await runtime.sweep(new Set([...adopted, ...paused]));
  } catch (err) {
    log.error({ err }, 'could not remove everything left on the host; the next start tries again');
  }
  for (const { row, to, why } of outcomes) {
    await records.transition(row.id, to, why);
    log.warn({ instanceId: row.id, state: to, reason: why.reason, reasonCode: why.code }, 'instance settled at start');
  }
  const failed = outcomes.filter((o) => o.to === 'failed').map((o) => o.row.id);
  const stopped = outcomes.filter((o) => o.to === 'stopped').map((o) => o.row.id);
  if (rows.length + swept.length > 0) {
    log.info({ adopted: adopted.length, paused: paused.length, failed: failed.length, stopped: stopped.length, swept }, 'reconciled instances with the host');
  }
  return { adopted, paused, failed, stopped, swept };
}
