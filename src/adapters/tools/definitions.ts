// The agent tools: one set of definitions (names, descriptions a model can act on, JSON
// Schema parameters, MCP annotations, the endpoint each maps to), generated for a scope
// (one room, or any room of the organization) and the server's limits. GET .../tools,
// POST .../tools/call, the MCP server at /mcp and `roomkit mcp` all take their tools
// from here, so they cannot drift apart.
import { PROFILE_DEFAULTS } from '../../core/profile-schema.ts';
import { formatBytes } from '../../lib/format-size.ts';
import { ROOM_ID_PATTERN, UUID_PATTERN } from '../../lib/ids.ts';
import { COMMAND_SIGNALS } from '../../runtimes/types.ts';
import type { AuditAction } from '../../core/audit-schema.ts';

/** Tools that act on a room's instance. */
export const ROOM_TOOLS = ['run_command', 'run_code', 'command_output', 'kill_command', 'revert_command', 'read_file', 'write_file', 'list_files', 'delete_file'] as const;
/** Tools that create, show and delete a room's instance (MCP only: there the model picks rooms). */
export const INSTANCE_TOOLS = ['create_instance', 'get_instance', 'delete_instance'] as const;
export type ToolName = (typeof ROOM_TOOLS)[number] | (typeof INSTANCE_TOOLS)[number];

/**
 * The action of the core operation each tool calls, as the audit trail names it; null for
 * the read-only tools. Core names the action itself as it runs: this is what a call
 * refused before it reached core (its arguments did not fit) is recorded as.
 */
export const TOOL_ACTIONS: Readonly<Record<ToolName, AuditAction | null>> = {
  run_command: 'command.run',
  run_code: 'context.run',
  kill_command: 'command.kill',
  revert_command: 'command.revert',
  write_file: 'file.write',
  delete_file: 'file.delete',
  create_instance: 'instance.create',
  delete_instance: 'instance.delete',
  command_output: null,
  read_file: null,
  list_files: null,
  get_instance: null,
};

/** Images a model can be shown: the types the vendors' APIs and MCP clients accept. */
export const IMAGE_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** Largest image returned inline (the vendors refuse larger ones); larger ones are described. */
export const MAX_INLINE_IMAGE_BYTES = 5 * 1024 * 1024;
/** Profile used when an MCP call names none. */
export const DEFAULT_PROFILE = 'default';

export type JsonSchema = Record<string, unknown>;

export interface ObjectSchema {
  type: 'object';
  properties: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties: false;
}

/** MCP's tool annotations: hints for clients deciding what to confirm with the user. */
export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** The API endpoint a tool maps to; `query` and `body` name the arguments that go there. */
export interface ToolEndpoint {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `{path}` stands for the `path` argument; `{profile_id}` and `{room_id}` for the room when not fixed. */
  path: string;
  query?: string[];
  body?: string[];
}

export interface ToolDefinition {
  name: ToolName;
  title: string;
  description: string;
  input_schema: ObjectSchema;
  annotations: ToolAnnotations;
  endpoint: ToolEndpoint;
}

/** What a room's machine is like, from the profile it was made from: the descriptions state it. */
export interface MachineFacts {
  image: string;
  user: string;
  home: string;
  commandTimeoutS: number;
  egress: 'internet' | 'none' | 'allowlist';
}

/** Server limits the descriptions state and the result formatting applies. */
export interface ToolLimits {
  maxOutputBytes: number;
  maxFileReadBytes: number;
  maxUploadBytes: number;
  filesChangedLimit: number;
  maxListEntries: number;
}

/**
 * What the tools are for: one room, fixed by the caller (GET .../tools; the tools take
 * no room argument), or any room of the organization (MCP: each tool takes `room` and
 * `profile`, and the instance tools exist).
 */
export type ToolScope =
  | { kind: 'room'; profileId: string; roomId: string; machine: MachineFacts }
  | { kind: 'organization' };

const ROOM_PATH = '/api/profile/{profile_id}/room/{room_id}';


/** The tools of a scope, their descriptions written for a model. */
export function toolDefinitions(scope: ToolScope, limits: ToolLimits): ToolDefinition[] {
  const room = scope.kind === 'room' ? scope : undefined;
  const m = room?.machine;
  const base = room ? `/api/profile/${room.profileId}/room/${encodeURIComponent(room.roomId)}` : ROOM_PATH;

  // Phrases that differ between one known room and any room of the organization.
  const where = m ? "this room's machine" : "the room's machine";
  const user = m ? `user \`${m.user}\` (uid 1000)` : "the profile's unprivileged user (uid 1000)";
  const home = m ? m.home : 'its home directory';
  const relative = m ? `relative to ${m.home}` : 'relative to the home directory';
  const timeout = m
    ? `${m.commandTimeoutS} s, also the most timeout_s may ask for`
    : `the profile's command_timeout_s (${PROFILE_DEFAULTS.command_timeout_s} s unless the profile sets another), also the most timeout_s may ask for`;
  const network = !m ? '' : m.egress === 'internet' ? ' It can reach the internet.' : m.egress === 'allowlist' ? ' It can reach only the hosts its profile allows.' : ' It has no network access.';
  const machineIntro = m ? `an isolated Linux machine (${m.image})` : 'an isolated Linux machine';
  const half = formatBytes(Math.floor(limits.maxOutputBytes / 2));

  // Arguments naming the room, when the scope does not fix it.
  const roomArgs: Record<string, JsonSchema> = room
    ? {}
    : {
        room: {
          type: 'string',
          pattern: ROOM_ID_PATTERN,
          description: 'The room: a name you choose for a machine, e.g. a task or session id (1-128 of A-Z a-z 0-9 . _ -).',
        },
        profile: {
          type: 'string',
          minLength: 1,
          maxLength: 64,
          description: `The profile the room belongs to, by name or id (default "${DEFAULT_PROFILE}"). The profile sets the machine's image, memory, CPUs, disk, user and time limits.`,
        },
      };
  const roomRequired = room ? [] : ['room'];
  const object = (properties: Record<string, JsonSchema>, required: string[]): ObjectSchema => {
    const all = [...roomRequired, ...required];
    return { type: 'object', properties: { ...roomArgs, ...properties }, ...(all.length > 0 ? { required: all } : {}), additionalProperties: false };
  };
  const path = (what: string): JsonSchema => ({
    type: 'string',
    minLength: 1,
    maxLength: 4096,
    description: `${what}: absolute, or ${relative}.`,
  });

  const definitions: ToolDefinition[] = [
    {
      name: 'run_command',
      title: 'Run a command',
      description: [
        `Runs a shell command with \`sh -c\` in ${where}, ${machineIntro}, and returns its output, its exit code and the files it changed.${network}`,
        `- Runs as ${user} in ${home}; relative paths are ${relative}. \`sudo\` works without a password (e.g. \`sudo apt-get install -y jq\`; if apt cannot find a package or a download fails, run \`sudo apt-get update\` first).`,
        '- Each call is a new shell: `cd` and variables do not carry over. Chain commands with `&&`, or pass `cwd`.',
        `- Time limit: ${timeout}. At the limit every process of the command is killed and the exit code is 124.`,
        '- Long work (servers, builds, test suites, downloads): pass `background: true`. The call then answers at once with a command_id; the command has no time limit, command_output shows its new output and, once it ends, its exit code, and kill_command stops it.',
        '- Standard input is empty: use non-interactive options (`-y`, `--yes`).',
        `- Output is stdout and stderr interleaved in the order written (writes to the two within a few milliseconds of each other may appear swapped). Beyond ${formatBytes(limits.maxOutputBytes)} the middle is cut: the first and the last ${half} are kept.`,
        '- A non-zero exit code is reported, not raised: read the output to see what failed.',
        `- "Files changed" lists every regular file the command created, modified or deleted anywhere on the machine while it ran (at most ${limits.filesChangedLimit}), with its size, MIME type and a URL where its content can be fetched without authentication, e.g. to show the user an image or a document you made.`,
      ].join('\n'),
      input_schema: object(
        {
          command: { type: 'string', minLength: 1, maxLength: 65536, description: 'The shell command, e.g. "ls -la" or "cd app && npm test".' },
          cwd: { ...path('Working directory'), description: `Working directory: absolute, or ${relative} (default: ${m ? m.home : 'the home directory'}).` },
          timeout_s: {
            type: 'integer',
            minimum: 1,
            ...(m ? { maximum: m.commandTimeoutS } : {}),
            description: `Time limit in seconds (default and most: ${m ? `${m.commandTimeoutS}` : "the profile's command_timeout_s"}; with background: none unless given).`,
          },
          background: { type: 'boolean', description: 'Start the command and answer at once with its command_id instead of waiting for it (default false).' },
        },
        ['command'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: m ? m.egress === 'internet' : true },
      endpoint: { method: 'POST', path: `${base}/command`, body: ['command', 'cwd', 'timeout_s', 'background'] },
    },
    {
      name: 'run_code',
      title: 'Run Python code',
      description: [
        `Runs Python code in a live interpreter on ${where} that keeps its state between calls: variables, imports, functions and loaded data stay for the next run_code call. Use it for data analysis, calculations and charts built up step by step; use run_command for shell commands, installing packages and running programs (there each call is a new shell).`,
        '- The code runs like a notebook cell: the value of its last expression is returned, with what it prints; `display(obj)` shows an object on the way.',
        '- matplotlib figures come back as images you can see (PNG), with their data, and as files under ~/.roomkit/outputs with a URL to show the user; pandas DataFrames come back as tables. These need the packages on the machine (`python3-matplotlib`, `python3-pandas` with run_command `sudo apt-get install -y …`).',
        '- An exception comes back with its traceback, and the interpreter keeps everything defined before it.',
        `- Time limit: ${timeout}. At the limit the code is interrupted (KeyboardInterrupt) and the state is kept; code that ignores the interrupt ends the interpreter, and its state is lost.`,
        `- Runs as ${user}, in ${home}.`,
      ].join('\n'),
      input_schema: object(
        {
          code: { type: 'string', minLength: 1, maxLength: 1048576, description: 'Python code, e.g. "import pandas as pd\\ndf = pd.read_csv(\'data.csv\')\\ndf.describe()".' },
          timeout_s: {
            type: 'integer',
            minimum: 1,
            ...(m ? { maximum: m.commandTimeoutS } : {}),
            description: `Time limit in seconds (default and most: ${m ? `${m.commandTimeoutS}` : "the profile's command_timeout_s"}).`,
          },
        },
        ['code'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: m ? m.egress === 'internet' : true },
      endpoint: { method: 'POST', path: `${base}/contexts/{context_id}/run`, body: ['code', 'timeout_s'] },
    },
    {
      name: 'command_output',
      title: 'Check a command',
      description: [
        `Shows a command started with run_command in ${where} (with background: true, or any earlier one), by its command_id: whether it still runs, its output from \`offset\` on and, once it has ended, its exit code and the files it changed.`,
        '- Output is counted in bytes. The answer gives next_offset: pass it as offset next time to get only the output printed since.',
        `- The last ${formatBytes(limits.maxOutputBytes)} of a command's output is kept, for 15 minutes after it ends.`,
        '- To wait for a background command, call this again after a while (e.g. run_command `sleep 10` in between for long work).',
      ].join('\n'),
      input_schema: object(
        {
          command_id: { type: 'string', pattern: UUID_PATTERN, description: 'The command_id run_command answered with.' },
          offset: { type: 'integer', minimum: 0, description: 'Byte offset to read the output from: the next_offset of the previous call (default 0: from the start).' },
        },
        ['command_id'],
      ),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/commands/{command_id}`, query: ['offset'] },
    },
    {
      name: 'kill_command',
      title: 'Stop a command',
      description: [
        `Stops a running command of ${where} by its command_id, with every process it started (also ones it left in the background).`,
        '- signal KILL (default) ends it at once; TERM (or INT, HUP) asks it to stop, so it may clean up first: check with command_output.',
      ].join('\n'),
      input_schema: object(
        {
          command_id: { type: 'string', pattern: UUID_PATTERN, description: 'The command_id run_command answered with.' },
          signal: { type: 'string', enum: [...COMMAND_SIGNALS], description: 'The signal to send (default KILL).' },
        },
        ['command_id'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      endpoint: { method: 'POST', path: `${base}/commands/{command_id}/kill`, body: ['signal'] },
    },
    {
      name: 'revert_command',
      title: 'Undo the file changes of a command',
      description: [
        `Puts every file an earlier command of ${where} created, modified or deleted back as it was before that command: use it when a command broke something (a bad edit, a deleted file, a failed upgrade) instead of repairing it by hand.`,
        '- Only for commands run with undo kept: the profile sets keep_undo (otherwise the call says there is no undo point). Each command can be reverted once.',
        '- Only files are put back: running processes, memory and directories the command made stay as they are.',
        '- If later commands changed some of the same files, it refuses and names them; pass force: true to revert anyway (their changes to those files are lost).',
        '- Answers with the files the revert changed.',
      ].join('\n'),
      input_schema: object(
        {
          command_id: { type: 'string', pattern: UUID_PATTERN, description: 'The command_id of the command whose changes to undo (run_command answered with it).' },
          force: { type: 'boolean', description: 'Revert even when later commands changed some of the same files (default false).' },
        },
        ['command_id'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      endpoint: { method: 'POST', path: `${base}/commands/{command_id}/revert`, body: ['force'] },
    },
    {
      name: 'read_file',
      title: 'Read a file',
      description: [
        `Reads a file of ${where} as ${user}, fresh on every call.`,
        `- Text (valid UTF-8) comes back as it is. Beyond ${formatBytes(limits.maxOutputBytes)} only the first part is returned, with a note saying how to read on: \`offset\` and \`limit\` pick lines.`,
        `- PNG, JPEG, GIF and WebP images up to ${formatBytes(MAX_INLINE_IMAGE_BYTES)} come back as images you can see.`,
        '- Other binary files are described (type, size, URL), not returned: inspect them with run_command (`file`, `xxd | head`).',
        `- Files larger than ${formatBytes(limits.maxFileReadBytes)} cannot be read here: use run_command (\`head\`, \`tail\`, \`grep\`).`,
      ].join('\n'),
      input_schema: object(
        {
          path: path('The file'),
          offset: { type: 'integer', minimum: 1, description: 'First line to return, counting from 1 (text files; default 1).' },
          limit: { type: 'integer', minimum: 1, description: 'How many lines to return at most (text files; default: all).' },
        },
        ['path'],
      ),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/file/{path}` },
    },
    {
      name: 'write_file',
      title: 'Write a file',
      description: [
        `Creates or replaces a file of ${where} as ${user}, with the whole content given, creating missing parent directories.`,
        `- At most ${formatBytes(limits.maxUploadBytes)}. Binary data goes base64-encoded with encoding "base64".`,
        '- To change part of a file, read it and write the whole new content, or edit it in place with run_command (`sed -i`, `patch`).',
        '- Answers whether the file was created or replaced, its size, and a URL where its content can be fetched without authentication.',
      ].join('\n'),
      input_schema: object(
        {
          path: path('The file'),
          content: { type: 'string', description: 'The whole new content of the file.' },
          encoding: { type: 'string', enum: ['utf-8', 'base64'], description: 'How content is given: "utf-8" text (default) or "base64" bytes.' },
        },
        ['path', 'content'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'PUT', path: `${base}/file/{path}`, body: ['content', 'encoding'] },
    },
    {
      name: 'list_files',
      title: 'List a directory',
      description: [
        `Lists a directory of ${where} as ${user}: each entry's type, size in bytes, permissions, modification time and name (directories end with "/"), sorted by name, at most ${limits.maxListEntries} entries.`,
        '- For a recursive view or a search, use run_command (`find`, `ls -R`, `grep -r`).',
      ].join('\n'),
      input_schema: object({ path: { ...path('The directory'), description: `The directory: absolute, or ${relative} (default: ${m ? m.home : 'the home directory'}).` } }, []),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/files`, query: ['path'] },
    },
    {
      name: 'delete_file',
      title: 'Delete a file',
      description: `Deletes a file or a symbolic link of ${where} as ${user}. Directories are not deleted here: use run_command (\`rm -r DIR\`).`,
      input_schema: object({ path: path('The file') }, ['path']),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'DELETE', path: `${base}/file/{path}` },
    },
  ];
  if (room) return definitions;

  const instanceTools: ToolDefinition[] = [
    {
      name: 'create_instance',
      title: 'Create a machine',
      description: [
        "Creates a room's machine, an isolated Linux machine, and waits until it is ready (a few seconds; the first machine of a profile can take a minute while its image is built). If the room already has one, answers with it: calling again is safe.",
        '- Every other tool needs the room to have a machine. Files and installed packages stay on it until it is deleted (or stopped after the profile\'s idle time).',
        '- Answers with the machine\'s user, home directory, command time limit and network access.',
      ].join('\n'),
      input_schema: object({}, []),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'POST', path: ROOM_PATH },
    },
    {
      name: 'get_instance',
      title: 'Show a machine',
      description: "Shows a room's machine: its state (ready, being created, failed and why), its user, home directory, command time limit and network access.",
      input_schema: object({}, []),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: ROOM_PATH },
    },
    {
      name: 'delete_instance',
      title: 'Delete a machine',
      description: "Stops a room's machine and deletes it with everything on it: this cannot be undone. create_instance gives the room a new, empty machine.",
      input_schema: object({}, []),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'DELETE', path: ROOM_PATH },
    },
  ];
  return [...instanceTools, ...definitions];
}
