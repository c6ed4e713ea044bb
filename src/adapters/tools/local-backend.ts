// The tool backend over roomkit's own services, acting as one organization: what
// POST .../tools/call and the MCP server at /mcp run tools with. Everything the
// organization cannot see is not found, as over HTTP.
import type { Config } from '../../config.ts';
import type { Commands } from '../../core/commands.ts';
import type { Contexts } from '../../core/contexts.ts';
import { roomRef } from '../../core/instance-address.ts';
import type { Reverts } from '../../core/reverts.ts';
import { type Files, MAX_LIST_ENTRIES } from '../../core/files.ts';
import type { Instances } from '../../core/instances.ts';
import type { Profile, ProfileSpec } from '../../core/profile-schema.ts';
import { type Profiles, specOf } from '../../core/profiles.ts';
import { AppError } from '../../errors.ts';
import { isUuid } from '../../lib/ids.ts';
import type { CommandSignal } from '../../runtimes/types.ts';
import type { InstanceInfo, ProfileFacts, RoomRef, ToolBackend } from './backend.ts';
import type { MachineFacts, ToolLimits } from './definitions.ts';

export function machineFacts(spec: ProfileSpec): MachineFacts {
  return {
    image: spec.image,
    user: spec.user,
    home: spec.home,
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

export interface ToolDeps {
  profiles: Profiles;
  instances: Instances;
  commands: Commands;
  contexts: Contexts;
  reverts: Reverts;
  files: Files;
  config: Config;
}

/** Tools run in-process, as one organization: everything it cannot see is not found. */
export class LocalToolBackend implements ToolBackend {
  private readonly deps: ToolDeps;
  private readonly organizationId: string;
  private readonly keyId: string | undefined;

  constructor(deps: ToolDeps, organizationId: string, keyId?: string) {
    this.deps = deps;
    this.organizationId = organizationId;
    this.keyId = keyId;
  }

  /** The profile a call names, by id or by name. */
  private async profile(ref: string): Promise<Profile> {
    const { profiles } = this.deps;
    if (isUuid(ref)) return profiles.get(this.organizationId, ref.toLowerCase());
    const found = (await profiles.list(this.organizationId)).find((p) => p.name === ref);
    // What to give instead is the executor's to say, in terms of the tools.
    if (!found) throw new AppError('profile_not_found', `no profile named "${ref}" in this organization`);
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
    const instance = await this.deps.instances.delete(this.organizationId, profile.profile_id, ref.room, this.keyId === undefined ? {} : { keyId: this.keyId });
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

  async revertCommand(ref: RoomRef, commandId: string, force: boolean) {
    const profile = await this.profile(ref.profile);
    return this.deps.reverts.revert(this.organizationId, profile.profile_id, ref.room, commandId, { force });
  }

  async killCommand(ref: RoomRef, commandId: string, signal: CommandSignal) {
    const profile = await this.profile(ref.profile);
    return this.deps.commands.kill(this.organizationId, profile.profile_id, ref.room, commandId, signal);
  }

  async runCode(ref: RoomRef, input: { code: string; timeout_s?: number }) {
    const profile = await this.profile(ref.profile);
    const address = roomRef(this.organizationId, profile.profile_id, ref.room);
    const [oldest] = await this.deps.contexts.listAt(address);
    const context = oldest ?? (await this.deps.contexts.createAt(address, {}));
    return this.deps.contexts.runAt(address, context.context_id, input);
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
