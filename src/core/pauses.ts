// Pausing and resuming instances: the moves `ready → pausing → paused` and `paused →
// resuming → ready`, with the store's record of what a pause kept and since when. The
// runtime does the machine work (Runtime.pause/resume); this class orders it against
// the store: one pause or resume per instance at a time, quotas and host admission
// checked before a resume takes memory again (idle instances paused for it under memory
// pressure), and a resume that fails leaves the instance paused (its files are intact)
// with why in its state history. A resume whose saved memory could not be restored (the
// runtime booted the instance over its files instead) is ready, and its `ready` entry
// says so (`memory_lost`).
import type { Logger } from 'pino';
import { AppError, type ErrorHint } from '../errors.ts';
import type { PausableRuntime, PauseOptions, Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import type { InstanceRecord } from './stored-json.ts';
import type { Admission } from './admission.ts';
import type { EndReason, InstanceRecords } from './instance-records.ts';
import { resumedDeadline } from './instance-options.ts';
import type { ProfileSpec } from './profile-schema.ts';
import { machineSpecOf } from './profiles.ts';
import type { Quotas } from './quotas.ts';

export interface PausesDeps {
  db: Db;
  records: InstanceRecords;
  quotas: Quotas;
  admission: Admission;
  log: Logger;
  /** Told when an instance's machine is about to stop for a pause (its terminals end, or are let go when its memory is kept). */
  onPausing(instanceId: string, why: EndReason, keepsMemory: boolean): void;
  /** Runs a resume's admission, making room under memory pressure (memory-pressure.ts) when it is refused for memory. */
  makingRoom<T>(admit: () => Promise<T>, resuming: string): Promise<T>;
}

export class Pauses {
  private readonly deps: PausesDeps;
  /** The pause or resume under way, per instance. */
  private readonly underway = new Map<string, Promise<unknown>>();

  constructor(deps: PausesDeps) {
    this.deps = deps;
  }

  /** Whether the runtime can pause its instances. */
  static supported(runtime: Runtime): runtime is Runtime & PausableRuntime {
    return runtime.capabilities.pause && runtime.pause !== undefined && runtime.resume !== undefined;
  }

  /** Settles when the pause or resume under way for the instance (or, without an id, every one) has ended. */
  async settled(instanceId?: string): Promise<void> {
    const ops = instanceId === undefined ? [...this.underway.values()] : [this.underway.get(instanceId)];
    await Promise.allSettled(ops);
  }

  /** Whether a pause or resume of the instance is under way in this process. */
  isUnderway(instanceId: string): boolean {
    return this.underway.has(instanceId);
  }

  /**
   * Pauses a ready instance; resolves once it is paused. A pause that cannot finish
   * (after one more try) fails the instance: its machine could be neither stopped
   * cleanly nor kept.
   */
  async pause(runtime: Runtime & PausableRuntime, row: InstanceRecord, why: EndReason, options: PauseOptions = { memory: true }): Promise<void> {
    const { records, log } = this.deps;
    if (this.underway.has(row.id) || !(await records.transitionFrom(row.id, 'ready', 'pausing', why))) {
      throw stateConflict(await records.getRow(row.id), 'pause');
    }
    const op = (async () => {
      this.deps.onPausing(row.id, why, options.memory && runtime.capabilities.pauseMemory === true);
      const started = performance.now();
      let outcome;
      try {
        outcome = await runtime.pause(row.id, options).catch(async (err: unknown) => {
          log.warn({ instanceId: row.id, err }, 'pausing an instance failed; trying once more');
          return runtime.pause(row.id, options);
        });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        log.error({ instanceId: row.id, err }, 'could not pause an instance');
        await runtime.destroy(row.id).catch((destroyErr: unknown) => log.error({ instanceId: row.id, err: destroyErr }, 'could not remove an instance whose pause failed'));
        await records.transitionFrom(row.id, 'pausing', 'failed', { reason: `its pause failed: ${message}`, code: 'pause_failed' });
        throw new AppError('instance_pause_failed', `the instance could not be paused and has failed (${message}); delete it and create another`);
      }
      await records.recordPause(row.id, outcome.memoryKept);
      await records.transitionFrom(row.id, 'pausing', 'paused', why);
      log.info({ instanceId: row.id, memoryKept: outcome.memoryKept, elapsedMs: Math.round(performance.now() - started), reasonCode: why.code }, 'instance paused');
    })();
    await this.track(row.id, op);
  }

  /**
   * Resumes a paused instance; resolves once it is ready. One whose resume is under way
   * is waited for; with `waitForPause`, so is one whose pause is (a request that wakes
   * it), else a pausing instance is a conflict (an explicit resume).
   */
  async resume(
    runtime: Runtime & PausableRuntime,
    row: InstanceRecord,
    spec: ProfileSpec,
    why: EndReason,
    options: { waitForPause: boolean },
  ): Promise<void> {
    const { records, db, log } = this.deps;
    let current = row;
    for (let turn = 0; turn < 3; turn++) {
      const pending = this.underway.get(row.id);
      if (pending === undefined) break;
      if (current.state === 'pausing' && !options.waitForPause) throw stateConflict(current, 'resume');
      await pending.catch(() => {});
      current = await records.getRow(row.id);
    }
    if (current.state === 'ready') return;
    if (current.state !== 'paused') throw stateConflict(current, 'resume');
    const { resources } = current;
    // It takes memory and CPUs again (its disk is counted already): the same checks as a create.
    await this.deps.makingRoom(
      () =>
        this.deps.admission.serial(async () => {
          await db.transaction().execute(async (trx) => {
            await this.deps.quotas.lock(trx, current.organization_id);
            await this.deps.quotas.assertInstanceFits(trx, current.organization_id, { ...resources, disk_mb: 0 });
            await this.deps.admission.assertFits(trx, runtime, { ...resources, disk_mb: 0 });
          });
          if (this.underway.has(row.id) || !(await records.transitionFrom(row.id, 'paused', 'resuming', why))) {
            throw stateConflict(await records.getRow(row.id), 'resume');
          }
        }),
      row.id,
    );
    const op = (async () => {
      const started = performance.now();
      let outcome;
      try {
        outcome = await runtime.resume({ instanceId: row.id, spec: machineSpecOf(spec), log: log.child({ instanceId: row.id }) });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        log.warn({ instanceId: row.id, err }, 'resuming an instance failed; it stays paused');
        await records.transitionFrom(row.id, 'resuming', 'paused', { reason: `its resume failed: ${message}`, code: 'resume_failed' });
        throw new AppError('instance_resume_failed', `the instance could not be resumed and is paused again (${message}); try again, or delete it`, {
          instance_id: row.id,
        });
      }
      // A fresh run: its deadline (timeout_s) counts from the resume.
      await records.recordResume(row.id, resumedDeadline(current));
      const readyWhy: EndReason =
        outcome.memoryLost === undefined
          ? why
          : { reason: `${why.reason}, over its files only: its saved memory could not be restored (${outcome.memoryLost}), so its processes from before the pause are gone`, code: 'memory_lost', ...(why.keyId === undefined ? {} : { keyId: why.keyId }) };
      if (outcome.memoryLost !== undefined) log.warn({ instanceId: row.id, why: outcome.memoryLost }, 'a resume could not restore the saved memory; the instance was booted over its files');
      await records.transitionFrom(row.id, 'resuming', 'ready', readyWhy);
      log.info(
        { instanceId: row.id, elapsedMs: Math.round(performance.now() - started), reasonCode: readyWhy.code, memoryRestored: outcome.memoryRestored },
        'instance resumed',
      );
    })();
    await this.track(row.id, op);
  }

  private async track(instanceId: string, op: Promise<void>): Promise<void> {
    this.underway.set(instanceId, op);
    try {
      await op;
    } finally {
      if (this.underway.get(instanceId) === op) this.underway.delete(instanceId);
    }
  }
}

/** The Error for a pause or resume the instance's state does not allow. */
export function stateConflict(row: InstanceRecord, asked: 'pause' | 'resume'): AppError {
  const room = { profile_id: row.profile_id, room_id: row.room_id };
  const until = (state: string): ErrorHint => ({ code: 'poll_until', ...room, until: state });
  const poll: ErrorHint = { code: 'poll_state', ...room };
  const why: Record<string, [string, ErrorHint?]> = {
    pausing: asked === 'pause' ? ['it is being paused already', until('paused')] : ['it is being paused; resume it once it is "paused"', poll],
    resuming: asked === 'resume' ? ['it is being resumed already', until('ready')] : ['it is being resumed; pause it once it is "ready"', poll],
    paused: ['it is paused'],
    stopping: ['it is being deleted'],
    stopped: ['it was deleted'],
    failed: [`it failed (${row.failure_reason ?? 'unknown'}); delete it and create another`],
  };
  const [words, hint] = why[row.state] ?? [`it is still starting (${row.state})`, until('ready')];
  return new AppError('instance_state_conflict', `cannot ${asked} the room's instance: ${words}`, { instance_id: row.id, state: row.state }, hint);
}
