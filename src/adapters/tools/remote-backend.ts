// The tool layer's backend over roomkit's HTTP API, through the SDK: what `roomkit mcp`
// runs tools with, on the machine of a desktop agent client, against a roomkit server
// elsewhere. Failures arrive as the SDK's RoomkitError, whose `code` is the API's.
import { Roomkit, type RoomkitOptions } from '../../../sdk/src/index.ts';
import { errorFrom } from '../../../sdk/src/http.ts';
import type { ContextRunResult } from '../../core/context-schema.ts';
import type { CommandResult, CommandStatus } from '../../core/command-schema.ts';
import type { RevertResult } from '../../core/revert-schema.ts';
import type { DirectoryListing, FileContent, FileDeleted, FileWritten } from '../../core/file-schema.ts';
import type { CommandSignal } from '../../runtimes/types.ts';
import type { InstanceInfo, ProfileFacts, RoomRef, ToolBackend } from './backend.ts';

export class RemoteToolBackend implements ToolBackend {
  readonly client: Roomkit;
  readonly #apiKey: string | undefined;

  constructor(options: RoomkitOptions) {
    this.client = new Roomkit(options);
    // As the SDK's client takes it.
    this.#apiKey = options.apiKey ?? (process.env.ROOMKIT_API_KEY || undefined);
  }

  /**
   * A JSON call the SDK has no method for (code contexts), with the SDK's errors: run once,
   * never repeated (a run is not safe to repeat).
   */
  async #call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<any> {
    const url = `${this.client.baseUrl}${path}`;
    const response = await fetch(url, {
      method,
      headers: { ...(this.#apiKey ? { authorization: `Bearer ${this.#apiKey}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw await errorFrom(response, method, url);
    return response.json();
  }

  private room(ref: RoomRef) {
    return this.client.room(ref.profile, ref.room);
  }

  private async facts(ref: RoomRef): Promise<ProfileFacts> {
    const p = await this.client.profiles.get(ref.profile);
    return {
      profile_id: p.profile_id,
      name: p.name,
      image: p.image,
      user: p.user,
      home: p.home,
      commandTimeoutS: p.command_timeout_s,
      egress: p.network.egress,
    };
  }

  async createInstance(ref: RoomRef): Promise<InstanceInfo> {
    const instance = await this.room(ref).create();
    return { instance, profile: await this.facts(ref) };
  }

  async getInstance(ref: RoomRef): Promise<InstanceInfo> {
    const instance = await this.room(ref).get();
    return { instance, profile: await this.facts(ref) };
  }

  async deleteInstance(ref: RoomRef): Promise<InstanceInfo> {
    const profile = await this.facts(ref);
    const instance = await this.room(ref).delete();
    return { instance, profile };
  }

  async runCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandResult> {
    const { command, ...options } = input;
    return this.room(ref).exec(command, options);
  }

  async startCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandStatus> {
    const { command, ...options } = input;
    const handle = await this.room(ref).execBackground(command, options);
    return handle.last ?? handle.status();
  }

  async commandStatus(ref: RoomRef, commandId: string, offset: number): Promise<CommandStatus> {
    return this.room(ref).command(commandId).status({ offset });
  }

  async killCommand(ref: RoomRef, commandId: string, signal: CommandSignal): Promise<CommandStatus> {
    return this.room(ref).command(commandId).kill(signal);
  }

  async revertCommand(ref: RoomRef, commandId: string, force: boolean): Promise<RevertResult> {
    return this.room(ref).command(commandId).revert({ force });
  }

  async runCode(ref: RoomRef, input: { code: string; timeout_s?: number }): Promise<ContextRunResult> {
    const contexts = `/api/profile/${encodeURIComponent(await this.room(ref).profileId())}/room/${encodeURIComponent(ref.room)}/contexts`;
    const [oldest] = ((await this.#call('GET', contexts)) as { contexts: { context_id: string }[] }).contexts;
    const contextId = oldest?.context_id ?? ((await this.#call('POST', contexts, {})) as { context_id: string }).context_id;
    return (await this.#call('POST', `${contexts}/${contextId}/run`, input)) as ContextRunResult;
  }

  async readFile(ref: RoomRef, path: string): Promise<FileContent> {
    return this.room(ref).readFile(path);
  }

  async writeFile(ref: RoomRef, path: string, data: Buffer): Promise<FileWritten> {
    return this.room(ref).writeFile(path, data);
  }

  async listFiles(ref: RoomRef, path: string): Promise<DirectoryListing> {
    return this.room(ref).list(path);
  }

  async deleteFile(ref: RoomRef, path: string): Promise<FileDeleted> {
    return this.room(ref).deleteFile(path);
  }
}
