// Running one tool call: find the tool, check the arguments a model sent against its
// schema (with messages a model can correct itself from), call the backend, and word the
// outcome. Which errors come back as a result for the model rather than as a failed
// request is the caller's choice (CallOptions.reportAsResult).
import Schema from 'typebox/schema';
import { AppError, ERROR_STATUS, type ErrorHint, type HintCode } from '../../errors.ts';
import type { FileUrl } from '../../core/file-links.ts';
import { expectOperation } from '../../core/operations.ts';
import { isUuid } from '../../lib/ids.ts';
import type { CommandSignal } from '../../runtimes/types.ts';
import type { RoomRef, ToolBackend } from './backend.ts';
import { DEFAULT_PROFILE, TOOL_ACTIONS, type ToolDefinition, type ToolName, type ToolLimits, type ToolScope } from './definitions.ts';
import { codeResult, commandText, fileResult, instanceText, linked, listingText, statusText, type ToolResult } from './results.ts';

export interface CallOptions {
  /** Origin the public_url paths are served from, so the model gets whole URLs. */
  publicBaseUrl?: string;
  /** The URL of a file's raw bytes (the REST API's raw endpoint), for links in what the model reads; none without it. */
  fileUrl?: FileUrl;
  /** API error codes answered as a tool result with isError; any other is thrown. */
  reportAsResult: (code: string) => boolean;
}

/**
 * Errors a model's arguments cause and that it can correct itself: a tool result, not a
 * failed request, wherever the caller is not the model's own loop.
 */
export const ARGUMENT_ERRORS: ReadonlySet<string> = new Set([
  'validation_error',
  'invalid_path',
  'is_a_directory',
  'not_a_directory',
  'file_not_found',
  'permission_denied',
  'file_too_large',
  'body_too_large',
  'no_space',
  'command_not_found',
  'command_not_running',
  'file_changed',
  'context_not_found',
]);

/** The API error an exception carries, if it is one (from the services or over HTTP). */
export function apiErrorOf(err: unknown): { error: string; message: string; details?: Record<string, unknown> } | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !Object.hasOwn(ERROR_STATUS, code)) return undefined;
  const details = (err as { details?: unknown }).details;
  // An error that came over HTTP (the SDK's) says what to do next as the SDK would: its
  // problem alone is taken, and the tools' own advice is added (executeCall).
  const problem = (err as { problem?: unknown }).problem;
  return {
    error: code,
    message: typeof problem === 'string' ? problem : err.message,
    ...(details !== null && typeof details === 'object' ? { details: details as Record<string, unknown> } : {}),
  };
}

/**
 * Tells the operation note of the call under way (core/operations.ts) that it is a call
 * of this tool: what the tool is expected to do, and what its arguments name, for a call
 * refused before core says so itself. An unknown tool keeps the note's own expectation.
 */
export function expectToolCall(name: string, rawArgs: unknown): void {
  if (!Object.hasOwn(TOOL_ACTIONS, name)) return expectOperation('tool.call', { tool: name });
  let args: Record<string, unknown> = {};
  try {
    const parsed = typeof rawArgs === 'string' ? (JSON.parse(rawArgs) as unknown) : rawArgs;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
  } catch {
    // Arguments that are not JSON name nothing; prepareCall refuses them.
  }
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const profile = text(args.profile);
  const action = TOOL_ACTIONS[name as ToolName];
  expectOperation(action, {
    tool: name,
    asked: {
      profileId: profile !== undefined && isUuid(profile) ? profile.toLowerCase() : undefined,
      roomId: text(args.room),
      commandId: text(args.command_id),
      command: action === 'command.run' ? text(args.command) : undefined,
      signal: action === 'command.kill' ? (text(args.signal) ?? 'KILL') : undefined,
      filePath: action === 'file.write' || action === 'file.delete' ? text(args.path) : undefined,
    },
  });
}

/** Finds the tool and checks its arguments; throws unknown_tool or invalid_arguments. */
export function prepareCall(definitions: ToolDefinition[], name: string, args: unknown): { definition: ToolDefinition; args: Record<string, unknown> } {
  const definition = definitions.find((d) => d.name === name);
  if (!definition) {
    throw new AppError('unknown_tool', `there is no tool "${name}"; the tools are ${definitions.map((d) => d.name).join(', ')}`);
  }
  // OpenAI's tool calls carry their arguments as JSON text; take them as they come.
  if (typeof args === 'string') {
    try {
      args = args.trim() === '' ? {} : (JSON.parse(args) as unknown);
    } catch {
      throw new AppError('invalid_arguments', `the arguments of ${name} are not valid JSON`, { errors: [{ field: 'arguments', message: 'is not valid JSON' }] });
    }
  }
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    throw new AppError('invalid_arguments', `the arguments of ${name} must be a JSON object`, {
      errors: [{ field: 'arguments', message: 'must be an object' }],
    });
  }
  // Models often send null for an optional argument they mean to leave out.
  const given = Object.fromEntries(Object.entries((args ?? {}) as Record<string, unknown>).filter(([, v]) => v !== null));
  const [valid, issues] = Schema.Errors(definition.input_schema, given);
  if (!valid) {
    const errors = issues
      // `additionalProperties: false` is reported twice: once per property, once for the object.
      .filter((issue) => issue.keyword !== 'boolean')
      .map((issue) => describeIssue(issue as unknown as SchemaIssue));
    const first = errors[0] ?? { field: 'arguments', message: 'the arguments are not valid' };
    throw new AppError(
      'invalid_arguments',
      `${name}: ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more problem(s), see details)` : ''}`,
      { errors },
    );
  }
  return { definition, args: given };
}

interface SchemaIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

function describeIssue(issue: SchemaIssue): { field: string; message: string } {
  const at = issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const field = (name: string) => ['arguments', name].filter(Boolean).join('.');
  switch (issue.keyword) {
    case 'required': {
      const missing = (issue.params.requiredProperties as string[] | undefined) ?? [];
      return { field: field(missing[0] ?? at), message: `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required` };
    }
    case 'additionalProperties': {
      const extra = (issue.params.additionalProperties as string[] | undefined) ?? [];
      return { field: field(extra[0] ?? at), message: `unknown argument${extra.length === 1 ? '' : 's'} ${extra.join(', ')}` };
    }
    case 'pattern':
      return { field: field(at), message: `${at} has a form that is not allowed (must match ${String(issue.params.pattern)})` };
    default:
      return { field: field(at), message: `${at || 'arguments'} ${issue.message}` };
  }
}

/** Runs a call whose arguments prepareCall accepted, and words the outcome for a model. */
export async function executeCall(
  backend: ToolBackend,
  scope: ToolScope,
  limits: ToolLimits,
  prepared: { definition: ToolDefinition; args: Record<string, unknown> },
  options: CallOptions,
): Promise<ToolResult> {
  const { definition, args } = prepared;
  const ref: RoomRef =
    scope.kind === 'room'
      ? { profile: scope.profileId, room: scope.roomId }
      : { profile: typeof args.profile === 'string' ? args.profile : DEFAULT_PROFILE, room: String(args.room) };
  const url = (relative: string) => `${options.publicBaseUrl ?? ''}${relative}`;
  const fileLink = (instanceId: string, path: string, pathEncoding?: 'percent') => (options.fileUrl ? url(options.fileUrl(instanceId, path, pathEncoding)) : undefined);
  try {
    switch (definition.name) {
      case 'run_command': {
        const input = {
          command: String(args.command),
          ...(typeof args.cwd === 'string' ? { cwd: args.cwd } : {}),
          ...(typeof args.timeout_s === 'number' ? { timeout_s: args.timeout_s } : {}),
        };
        if (args.background === true) {
          const status = await backend.startCommand(ref, input);
          const text = [
            `Started in the background: command_id ${status.command_id}. It runs until it ends${input.timeout_s === undefined ? '' : `, reaches ${input.timeout_s} s`} or is stopped with kill_command.`,
            `Check it with command_output (command_id ${status.command_id}, offset 0).`,
          ].join('\n');
          return { content: [{ type: 'text', text }], isError: false, structured: status };
        }
        const result = await backend.runCommand(ref, input);
        return { content: [{ type: 'text', text: commandText(result, url) }], isError: result.result.exit_code !== 0, structured: result };
      }
      case 'run_code': {
        const result = await backend.runCode(ref, { code: String(args.code), ...(typeof args.timeout_s === 'number' ? { timeout_s: args.timeout_s } : {}) });
        return codeResult(result, url);
      }
      case 'command_output': {
        const status = await backend.commandStatus(ref, String(args.command_id), typeof args.offset === 'number' ? args.offset : 0);
        return { content: [{ type: 'text', text: statusText(status, url) }], isError: false, structured: status };
      }
      case 'kill_command': {
        const signal = (typeof args.signal === 'string' ? args.signal : 'KILL') as CommandSignal;
        const status = await backend.killCommand(ref, String(args.command_id), signal);
        const text =
          status.state === 'running'
            ? `Sent ${signal} to command ${status.command_id}; it is still running (it may be cleaning up): check it with command_output.`
            : `Command ${status.command_id} is ${status.state}${status.exit_code === null ? '' : ` (exit code ${status.exit_code})`}.`;
        return { content: [{ type: 'text', text }], isError: false, structured: status };
      }
      case 'revert_command': {
        const reverted = await backend.revertCommand(ref, String(args.command_id), args.force === true);
        const lines = reverted.files_changed.map((f) => `  ${f.status} ${f.path}`);
        const text = [
          `Reverted command ${reverted.command_id}${reverted.forced ? ' (forced)' : ''}: ${reverted.files_changed_total} file(s) put back as they were before it.`,
          ...lines,
          ...(reverted.files_changed_truncated ? ['  (more not listed)'] : []),
        ].join('\n');
        return { content: [{ type: 'text', text }], isError: false, structured: reverted };
      }
      case 'read_file': {
        const file = await backend.readFile(ref, String(args.path));
        return fileResult(file, args, limits, fileLink);
      }
      case 'write_file': {
        const encoding = args.encoding === 'base64' ? 'base64' : 'utf-8';
        const content = String(args.content);
        if (encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(content.replace(/\s+/g, ''))) {
          throw new AppError('validation_error', 'content is not valid base64; send text with encoding "utf-8"');
        }
        const written = await backend.writeFile(ref, String(args.path), Buffer.from(content, encoding === 'base64' ? 'base64' : 'utf8'));
        const verb = written.status === 'created' ? 'Created' : 'Replaced';
        return {
          content: [{ type: 'text', text: `${verb} ${written.file_path} (${written.size} bytes).${linked(fileLink(written.instance_id, written.file_path, written.path_encoding))}` }],
          isError: false,
          structured: written,
        };
      }
      case 'list_files': {
        const listing = await backend.listFiles(ref, typeof args.path === 'string' ? args.path : '.');
        return { content: [{ type: 'text', text: listingText(listing) }], isError: false, structured: listing };
      }
      case 'delete_file': {
        const deleted = await backend.deleteFile(ref, String(args.path));
        return { content: [{ type: 'text', text: `Deleted ${deleted.file_path}.` }], isError: false, structured: deleted };
      }
      case 'create_instance': {
        const info = await backend.createInstance(ref);
        const how = info.created === false ? 'already had a machine' : info.created === true ? 'has a new machine' : 'has a machine';
        return { content: [{ type: 'text', text: `Room "${ref.room}" ${how}.\n${instanceText(info)}` }], isError: false, structured: info.instance };
      }
      case 'get_instance': {
        const info = await backend.getInstance(ref);
        return { content: [{ type: 'text', text: instanceText(info) }], isError: false, structured: info.instance };
      }
      case 'delete_instance': {
        const info = await backend.deleteInstance(ref);
        const { instance_id: id, state, failure_reason: reason } = info.instance;
        const text =
          state === 'stopped'
            ? `Machine ${id} of room "${ref.room}" is deleted, with everything on it.`
            : `Deleting machine ${id} of room "${ref.room}" ended in state ${state}.${reason ? ` ${reason}` : ''}`;
        return {
          content: [{ type: 'text', text }],
          isError: info.instance.state !== 'stopped',
          structured: info.instance,
        };
      }
    }
  } catch (err) {
    const api = apiErrorOf(err);
    if (!api || !options.reportAsResult(api.error)) throw err;
    // Core's hint in the tools' words (also one that came over HTTP, as the Error body's
    // hint); else, by the error's code, what the tools can do about it.
    const given = (err as { hint?: ErrorHint }).hint;
    const worded = given && typeof given.code === 'string' ? TOOL_WORDS[given.code as HintCode]?.(given, fileLink) : undefined;
    const hint = worded ?? (scope.kind === 'organization' ? TOOL_HINTS[api.error]?.(ref) : undefined);
    return { content: [{ type: 'text', text: `Error ${api.error}: ${api.message}${hint ? `\n${hint}` : ''}` }], isError: true, structured: api };
  }
}

/** Core's hints (errors.ts HINT_CODES) in terms of the tools; a hint without words here is left to TOOL_HINTS. */
const TOOL_WORDS: Partial<Record<HintCode, (hint: ErrorHint, fileLink: (instanceId: string, path: string) => string | undefined) => string | undefined>> = {
  command_in_file: () => 'Write long scripts to a file with write_file and run that.',
  stdin_in_file: () => 'Write the input to a file with write_file and redirect it (`cmd < file`).',
  kill_a_command: () => 'Wait for one to finish (command_output), or stop one with kill_command.',
  fetch_raw_file: (hint, fileLink) => {
    const link = fileLink(String(hint.instance_id), String(hint.path));
    return link === undefined ? undefined : `Its raw bytes are at ${link}`;
  },
};

/** What to do next, in terms of the tools, by the error's code. */
const TOOL_HINTS: Record<string, (ref: RoomRef) => string> = {
  instance_not_found: (ref) => `Room "${ref.room}" has no machine: create it with create_instance.`,
  instance_not_ready: (ref) => `get_instance shows the state of room "${ref.room}": wait until it is ready, or create_instance again if it failed.`,
  profile_not_found: () => `Leave profile out to use "${DEFAULT_PROFILE}", or give the name or id of one of the organization's profiles.`,
};
