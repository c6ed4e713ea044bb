// Reverts: put back every file one command changed as it was before it (its undo point,
// kept when the command ran with keep_undo). core/ checks that the command is the room's
// and ran in its current instance; the runtime refuses a command without an undo point,
// and one whose files later commands changed too unless forced (runtime-errors.ts gives
// those their API codes). Processes and memory are not reverted: only files.
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { CommandRecords } from './command-records.ts';
import { toFileChanges } from './commands.ts';
import type { Instances } from './instances.ts';
import type { Profiles } from './profiles.ts';
import type { RevertResult } from './revert-schema.ts';
import { appErrorOfRuntime } from './runtime-errors.ts';
import type { ServedFiles } from './served-files.ts';
import { noteOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, isInstanceRef, roomRef } from './instance-address.ts';
import { commandNotFound } from './commands.ts';
import type { FileLinks } from './file-links.ts';

export class Reverts {
  private readonly records: CommandRecords;
  private readonly instances: Instances;
  private readonly profiles: Profiles;
  private readonly servedFiles: ServedFiles;
  private readonly config: Config;
  private readonly fileLinks: FileLinks;

  constructor(deps: { db: Db; instances: Instances; profiles: Profiles; servedFiles: ServedFiles; fileLinks: FileLinks; config: Config }) {
    this.records = new CommandRecords(deps.db);
    this.instances = deps.instances;
    this.profiles = deps.profiles;
    this.servedFiles = deps.servedFiles;
    this.config = deps.config;
    this.fileLinks = deps.fileLinks;
  }

  async revert(organizationId: string, profileId: string, roomId: string, commandId: string, options: { force?: boolean }): Promise<RevertResult> {
    return this.revertAt(roomRef(organizationId, profileId, roomId), commandId, options);
  }

  async revertAt(address: InstanceAddress, commandId: string, options: { force?: boolean }): Promise<RevertResult> {
    noteOperation('command.revert', { ...addressFacts(address), commandId });
    // Another organization's profile or command is not found, like a missing one.
    if (!isInstanceRef(address)) await this.profiles.get(address.organizationId, address.profileId);
    const row = await this.records.findAt(address, commandId);
    if (!row) throw commandNotFound(address, commandId);
    const { row: instance } = await this.instances.requireReadyAt(address);
    if (instance.id !== row.instance_id) {
      throw new AppError('no_undo_point', `command ${commandId} ran in an earlier instance of the room (${row.instance_id}), whose files are gone; only commands of the room's current instance can be reverted`);
    }
    const runtime = this.instances.activeRuntime();
    if (!runtime.revertCommand) throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot keep undo points, so no command can be reverted`);
    const started = performance.now();
    let outcome;
    try {
      outcome = await runtime.revertCommand(instance.id, commandId, { force: options.force === true });
    } catch (err) {
      throw appErrorOfRuntime(err) ?? err;
    } finally {
      await this.instances.touch(instance.id).catch(() => {});
    }
    const limit = this.config.filesChangedLimit;
    const changes = outcome.changes;
    await this.servedFiles.record(instance.id, changes.slice(0, limit));
    return {
      command_id: commandId,
      instance_id: instance.id,
      files_changed: toFileChanges(instance.id, changes.slice(0, limit), this.fileLinks),
      files_changed_total: changes.length,
      files_changed_truncated: changes.length > limit,
      ...(outcome.changesMethod ? { files_changed_method: outcome.changesMethod } : {}),
      forced: options.force === true,
      duration_ms: Math.round(performance.now() - started),
    };
  }
}
