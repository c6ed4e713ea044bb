// The interface every way of running a tool goes through: roomkit's own services in the
// server (local-backend.ts) or its HTTP API from elsewhere (remote-backend.ts). Both
// throw errors whose `code` is one of the API's, so the executor words every outcome
// the same way whichever backend ran it.
import type { CommandResult, CommandStatus } from '../../core/command-schema.ts';
import type { ContextRunResult } from '../../core/context-schema.ts';
import type { DirectoryListing, FileContent, FileDeleted, FileWritten } from '../../core/file-schema.ts';
import type { Instance } from '../../core/instance-schema.ts';
import type { RevertResult } from '../../core/revert-schema.ts';
import type { CommandSignal } from '../../runtimes/types.ts';
import type { MachineFacts } from './definitions.ts';

/** A room as a tool call names it: the profile by id or name. */
export interface RoomRef {
  profile: string;
  room: string;
}

export interface ProfileFacts extends MachineFacts {
  profile_id: string;
  name: string;
}

export interface InstanceInfo {
  instance: Instance;
  profile: ProfileFacts;
  /** Whether a create made it (false: the room had it already); unknown elsewhere. */
  created?: boolean;
}

/**
 * What tools run against: roomkit's services in the server, or its HTTP API elsewhere.
 * Failures are thrown as errors whose `code` is one of the API's error codes.
 */
export interface ToolBackend {
  createInstance(ref: RoomRef): Promise<InstanceInfo>;
  getInstance(ref: RoomRef): Promise<InstanceInfo>;
  deleteInstance(ref: RoomRef): Promise<InstanceInfo>;
  runCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandResult>;
  /** Starts a command in the background and answers with its status at once. */
  startCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandStatus>;
  commandStatus(ref: RoomRef, commandId: string, offset: number): Promise<CommandStatus>;
  killCommand(ref: RoomRef, commandId: string, signal: CommandSignal): Promise<CommandStatus>;
  /** Runs code in the room's oldest code context, made on first use: every call of a room's tool shares one interpreter. */
  runCode(ref: RoomRef, input: { code: string; timeout_s?: number }): Promise<ContextRunResult>;
  revertCommand(ref: RoomRef, commandId: string, force: boolean): Promise<RevertResult>;
  readFile(ref: RoomRef, path: string): Promise<FileContent>;
  writeFile(ref: RoomRef, path: string, data: Buffer): Promise<FileWritten>;
  listFiles(ref: RoomRef, path: string): Promise<DirectoryListing>;
  deleteFile(ref: RoomRef, path: string): Promise<FileDeleted>;
}
