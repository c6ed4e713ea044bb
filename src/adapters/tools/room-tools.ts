// The tools of one room: GET .../tools describes them from the room's profile, and
// POST .../tools/call runs them as the caller's organization.
import { specOf } from '../../core/profiles.ts';
import type { ToolBackend } from './backend.ts';
import { toolDefinitions, type ToolDefinition, type ToolLimits, type ToolScope } from './definitions.ts';
import { ARGUMENT_ERRORS, executeCall, expectToolCall, prepareCall } from './executor.ts';
import { LocalToolBackend, machineFacts, type ToolDeps, toolLimits } from './local-backend.ts';
import type { ToolResult } from './results.ts';
import type { FileUrl } from '../../core/file-links.ts';

/** The tools of one room, as GET .../tools describes them and POST .../tools/call runs them. */
export class RoomTools {
  private readonly deps: ToolDeps;
  /** The URL of a file's raw bytes, for links in results (the REST API's raw endpoint). */
  readonly fileUrl: FileUrl;

  constructor(deps: ToolDeps, fileUrl: FileUrl) {
    this.deps = deps;
    this.fileUrl = fileUrl;
  }

  get limits(): ToolLimits {
    return toolLimits(this.deps.config);
  }

  /** A backend acting as the organization (the MCP server's), for the key that called (recorded with what it ends). */
  backend(organizationId: string, keyId?: string): ToolBackend {
    return new LocalToolBackend(this.deps, organizationId, keyId);
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
    expectToolCall(call.name, call.arguments);
    const { scope, definitions } = await this.forRoom(organizationId, profileId, roomId);
    const prepared = prepareCall(definitions, call.name, call.arguments);
    return executeCall(this.backend(organizationId), scope, this.limits, prepared, {
      ...options,
      fileUrl: this.fileUrl,
      reportAsResult: (code) => ARGUMENT_ERRORS.has(code),
    });
  }
}
