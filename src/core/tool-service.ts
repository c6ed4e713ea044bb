// The tool layer over roomkit's own services: the backend that /tools/call and the MCP
// server at /mcp run tools with, scoped to one organization, and the room tool set that
// GET .../tools describes.
import type { Config } from '../config.ts';
import { isUuid } from './ids.ts';
import type { CommandSignal } from '../runtimes/types.ts';
import { AppError } from '../errors.ts';
import type { Commands } from './commands.ts';
import { type Files, MAX_LIST_ENTRIES } from './files.ts';
import type { Instances } from './instances.ts';
import type { Profile, ProfileSpec } from './profile-schema.ts';
import { type Profiles, specOf } from './profiles.ts';
import {
  ARGUMENT_ERRORS,
  executeCall,
  type InstanceInfo,
  type MachineFacts,
  prepareCall,
  type ProfileFacts,
  type RoomRef,
  type ToolBackend,
  toolDefinitions,
  type ToolDefinition,
  type ToolLimits,
  type ToolResult,
  type ToolScope,
} from './tools.ts';


export function machineFacts(spec: ProfileSpec): MachineFacts {
  return {
    image: spec.image,
    user: spec.user,
    home: spec.home ?? `/home/${spec.user}`,
    commandTimeoutS: spec.command_timeout_s,
    egress: spec.network.egress,
  };
}

export function toolLimits(config: Config): ToolLimits {
  return {
    maxOutputBytes: config.maxOutputBytes,
    maxFileReadBytes: config.maxFileReadBytes,
    maxUploadBytes: config.maxUploadBytes,
    filesChangedLimit: config.filesChangedLimit,
    maxListEntries: MAX_LIST_ENTRIES,
  };
}

interface Deps {
  profiles: Profiles;
  instances: Instances;
  commands: Commands;
  files: Files;
  config: Config;
}

/** Tools run in-process, as one organization: everything it cannot see is not found. */
export class LocalToolBackend implements ToolBackend {
  private readonly deps: Deps;
  private readonly organizationId: string;

  constructor(deps: Deps, organizationId: string) {
    this.deps = deps;
    this.organizationId = organizationId;
  }

  /** The profile a call names, by id or by name. */
  private async profile(ref: string): Promise<Profile> {
    const { profiles } = this.deps;
    if (isUuid(ref)) return profiles.get(this.organizationId, ref.toLowerCase());
    const found = (await profiles.list(this.organizationId)).find((p) => p.name === ref);
    if (!found) throw new AppError('profile_not_found', `no profile named "${ref}" in this organization; name one that GET /api/profiles lists, or give its id`);
    return found;
  }

  /** What the room's machine is made from: its live instance's spec, else the profile's. */
  private async facts(profile: Profile, room: string): Promise<ProfileFacts> {
    const spec = (await this.deps.instances.liveSpec(this.organizationId, profile.profile_id, room)) ?? specOf(profile);
    return { profile_id: profile.profile_id, name: profile.name, ...machineFacts(spec) };
  }

  async createInstance(ref: RoomRef): Promise<InstanceInfo> {
    const profile = await this.profile(ref.profile);
    const { instance, created } = await this.deps.instances.create(this.organizationId, profile.profile_id, ref.room, { wait: true });
    return { instance, created, profile: await this.facts(profile, ref.room) };
  }

  async getInstance(ref: RoomRef): Promise<InstanceInfo> {
    const profile = await this.profile(ref.profile);
    const instance = await this.deps.instances.get(this.organizationId, profile.profile_id, ref.room);
    return { instance, profile: await this.facts(profile, ref.room) };
  }

  async deleteInstance(ref: RoomRef): Promise<InstanceInfo> {
    const profile = await this.profile(ref.profile);
    const facts = await this.facts(profile, ref.room);
    const instance = await this.deps.instances.delete(this.organizationId, profile.profile_id, ref.room);
    return { instance, profile: facts };
  }

  async runCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }) {
    const profile = await this.profile(ref.profile);
    return this.deps.commands.run(this.organizationId, profile.profile_id, ref.room, input);
  }

  async startCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }) {
    const profile = await this.profile(ref.profile);
    const session = await this.deps.commands.start(this.organizationId, profile.profile_id, ref.room, { ...input, background: true });
    return this.deps.commands.status(this.organizationId, profile.profile_id, ref.room, session.id);
  }

  async commandStatus(ref: RoomRef, commandId: string, offset: number) {
    const profile = await this.profile(ref.profile);
    return this.deps.commands.status(this.organizationId, profile.profile_id, ref.room, commandId, { offset });
  }

  async killCommand(ref: RoomRef, commandId: string, signal: CommandSignal) {
    const profile = await this.profile(ref.profile);
    return this.deps.commands.kill(this.organizationId, profile.profile_id, ref.room, commandId, signal);
  }

  async readFile(ref: RoomRef, path: string) {
    const profile = await this.profile(ref.profile);
    return this.deps.files.read(this.organizationId, profile.profile_id, ref.room, path);
  }

  async writeFile(ref: RoomRef, path: string, data: Buffer) {
    const profile = await this.profile(ref.profile);
    return this.deps.files.write(this.organizationId, profile.profile_id, ref.room, path, data);
  }

  async listFiles(ref: RoomRef, path: string) {
    const profile = await this.profile(ref.profile);
    return this.deps.files.list(this.organizationId, profile.profile_id, ref.room, path);
  }

  async deleteFile(ref: RoomRef, path: string) {
    const profile = await this.profile(ref.profile);
    return this.deps.files.delete(this.organizationId, profile.profile_id, ref.room, path);
  }
}

/** The tools of one room, as GET .../tools describes them and POST .../tools/call runs them. */
export class Tools {
  private readonly deps: Deps;

  constructor(deps: Deps) {
    this.deps = deps;
  }

  get limits(): ToolLimits {
    return toolLimits(this.deps.config);
  }

  /** A backend acting as the organization (the MCP server's). */
  backend(organizationId: string): ToolBackend {
    return new LocalToolBackend(this.deps, organizationId);
  }

  /**
   * The room's tools, described from the profile its live instance was made from (or
   * the profile as it is now, when the room has none yet). An unknown profile, or one
   * of another organization, is profile_not_found.
   */
  async forRoom(organizationId: string, profileId: string, roomId: string): Promise<{ scope: ToolScope; definitions: ToolDefinition[] }> {
    const profile = await this.deps.profiles.get(organizationId, profileId);
    const spec = (await this.deps.instances.liveSpec(organizationId, profileId, roomId)) ?? specOf(profile);
    const scope: ToolScope = { kind: 'room', profileId, roomId, machine: machineFacts(spec) };
    return { scope, definitions: toolDefinitions(scope, this.limits) };
  }

  /**
   * Runs one of the room's tools. Errors its arguments caused come back as a result with
   * isError, for the model to correct; the rest (no such profile or instance, the
   * instance not ready, too many commands) are thrown, for the caller's own code.
   */
  async call(
    organizationId: string,
    profileId: string,
    roomId: string,
    call: { name: string; arguments?: unknown },
    options: { publicBaseUrl?: string } = {},
  ): Promise<ToolResult> {
    const { scope, definitions } = await this.forRoom(organizationId, profileId, roomId);
    const prepared = prepareCall(definitions, call.name, call.arguments);
    return executeCall(this.backend(organizationId), scope, this.limits, prepared, {
      ...options,
      reportAsResult: (code) => ARGUMENT_ERRORS.has(code),
    });
  }
}
