// The client commands of `roomkit` (create, exec, cat, put, ls, rm, revert, status, pause, resume, keepalive, destroy;
// snapshots and fork are in snapshots.ts):
// a room's instance from a shell, through the SDK against a running server. Results
// go to stdout (as JSON with --json), progress and notes to stderr; a failure is one
// line `roomkit: error <code>: <message>` on stderr and a non-zero exit.
// Over 400 lines: one short function per command, with the helpers they share.
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { PROVISION_STATES } from '../core/lifecycle.ts';
import { formatBytes } from '../lib/format-size.ts';
import {
  type CommandResult,
  type Instance,
  type Room,
  Roomkit,
  RoomkitConnectionError,
  RoomkitError,
} from '../../sdk/src/index.ts';

/** roomkit's own failure during `exec`, told apart from the command's exit codes (as `docker run` does). */
const EXEC_FAILURE_EXIT = 125;
/** Most of roomkit's stdin `exec` reads for the command: the largest input a server may be set to take. */
const MAX_STDIN_READ_BYTES = 64 * 1024 * 1024;
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface ConnectionOptions {
  url?: string;
  apiKey?: string;
  json?: boolean;
}

export interface RoomOptions extends ConnectionOptions {
  profile?: string;
}

/** A failure found before asking the server, with a code like the API's. */
export class ClientError extends Error {
  readonly code: string;
  readonly exitCode: number;
  constructor(code: string, message: string, exitCode = 2) {
    super(message);
    this.code = code;
    this.exitCode = exitCode;
  }
}

export function registerClientCommands(program: Command): void {
  // `exec ROOM ls -la` passes -la on to the command, so options must come before the
  // room there; that needs positional options on the program.
  program.enablePositionalOptions();

  roomCommand(program, 'create <room>', 'create the room\'s instance (or find its live one), showing progress on stderr until it is ready')
    .option('--no-wait', 'answer at once, while the instance is still starting')
    .option('-e, --env <NAME=VALUE>', 'an environment variable for every command of the instance (repeatable)', collectEnv)
    .option('-l, --label <key=value>', 'a label of the instance, to find it by with `status --label` (repeatable)', collectLabel)
    .option('--timeout <seconds>', 'stop or pause it (the profile\'s idle_action) this long after its start; `keepalive` moves it', positiveInteger)
    .option('--from-snapshot <id>', 'start it from this snapshot (`roomkit snapshots` lists them) instead of the profile\'s image')
    .action(run(async (roomId: string, options: RoomOptions & { wait: boolean; env?: Record<string, string>; label?: Record<string, string>; timeout?: number; fromSnapshot?: string }) => {
      const room = roomOf(roomId, options);
      const progress = new Progress(roomId);
      let instance: Instance;
      try {
        instance = await room.create({
          wait: options.wait,
          onProgress: (i) => progress.update(i),
          ...(options.env === undefined ? {} : { env: options.env }),
          ...(options.label === undefined ? {} : { metadata: options.label }),
          ...(options.timeout === undefined ? {} : { timeout_s: options.timeout }),
          ...(options.fromSnapshot === undefined ? {} : { snapshot_id: options.fromSnapshot }),
        });
      } finally {
        progress.stop();
      }
      if (options.json) return printJson(instance);
      const how =
        instance.state !== 'ready' ? '' : instance.claimed_at !== null ? ' (from the profile\'s warm pool)' : progress.reported ? ` in ${progress.elapsed()}` : ' (already running)';
      const from = instance.snapshot_id === null ? '' : ` from snapshot ${instance.snapshot_id}`;
      process.stdout.write(`${instance.state}: room ${roomId} (profile ${options.profile ?? 'default'}), instance ${instance.instance_id}${from}${how}\n`);
    }));

  roomCommand(program, 'exec <room> <command...>', 'run a shell command in the room\'s instance and exit with its exit code')
    .usage('[options] <room> <command...>')
    .addHelpText('after', '\nOptions go before the room; everything after it is the command (quote it, or put it after --).\n' +
      'Human output: what the command writes to stdout and stderr as it is printed, on roomkit\'s stdout and stderr\n' +
      '(both on stdout for an instance without roomkit\'s agent, which cannot tell them apart), then the files it changed on stderr.\n' +
      'Input: when roomkit\'s stdin is not a terminal (a pipe or a file), all of it is read and given to the command\'s stdin\n' +
      '(at most the server\'s ROOMKIT_MAX_STDIN_BYTES, 1 MiB by default); --no-stdin leaves it unread. On a terminal the command\'s stdin is empty.\n' +
      `Exit code: the command's own; ${EXEC_FAILURE_EXIT} when roomkit itself failed.`)
    .option('--timeout <seconds>', 'time limit (default and maximum: the profile\'s command_timeout_s)', positiveInteger)
    .option('--cwd <dir>', 'working directory, absolute or relative to the home directory')
    .option('-e, --env <NAME=VALUE>', 'an environment variable (repeatable)', collectEnv)
    .option('--no-stdin', 'do not read roomkit\'s stdin (the command\'s is empty), e.g. in a loop that reads from a pipe')
    .passThroughOptions()
    .action(run(async (roomId: string, words: string[], options: RoomOptions & { timeout?: number; cwd?: string; env?: Record<string, string>; stdin: boolean }) => {
      const room = roomOf(roomId, options);
      // `exec ROOM -- cmd` reaches here with the `--` when options pass through.
      const command = (words[0] === '--' ? words.slice(1) : words).join(' ');
      if (command.trim() === '') throw new ClientError('validation_error', 'no command: give it after the room, e.g. roomkit exec ROOM ls -la');
      // Piped or redirected input is the command's; a terminal's is not read (there is no end to wait for).
      const stdin = options.stdin && !process.stdin.isTTY ? await readStdin(MAX_STDIN_READ_BYTES) : undefined;
      const execOptions = {
        ...(options.timeout === undefined ? {} : { timeout_s: options.timeout }),
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        ...(options.env === undefined ? {} : { env: options.env }),
        ...(stdin === undefined || stdin.length === 0 ? {} : { stdin: new Uint8Array(stdin) }),
      };
      let result: CommandResult;
      if (options.json) {
        result = await room.exec(command, execOptions);
        printJson(result);
      } else {
        // Interrupting roomkit (Ctrl-C) ends the command in the instance too.
        result = await room.execStream(command, {
          ...execOptions,
          killOnDisconnect: true,
          onOutput: (data, { stream }) => (stream === 'stderr' ? process.stderr : process.stdout).write(data),
        });
        reportCommand(result);
      }
      process.exitCode = result.result.exit_code;
    }, EXEC_FAILURE_EXIT));

  roomCommand(program, 'cat <room> <path>', 'write a file of the instance to stdout, byte for byte (relative paths are from the home directory)', { json: false })
    .action(run(async (roomId: string, path: string, options: RoomOptions) => {
      const file = await roomOf(roomId, options).openRaw(path);
      try {
        await pipeline(Readable.fromWeb(file.body as WebReadableStream<Uint8Array>), process.stdout, { end: false });
      } catch (err) {
        // A reader that stops early (`| head`) is not a failure.
        if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
      }
    }));

  roomCommand(program, 'put <room> <local> <remote>', 'upload a local file (- for stdin) to a path in the instance, creating its directories')
    .action(run(async (roomId: string, local: string, remote: string, options: RoomOptions) => {
      const bytes = local === '-' ? await readStdin() : await readLocal(local);
      const written = await roomOf(roomId, options).writeFile(remote, bytes);
      if (options.json) return printJson(written);
      process.stdout.write(`${written.status} ${written.file_path} (${formatBytes(written.size, 'listing')})\n`);
    }));

  roomCommand(program, 'ls <room> [dir]', 'list a directory of the instance (default: the home directory)')
    .action(run(async (roomId: string, dir: string | undefined, options: RoomOptions) => {
      const listing = await roomOf(roomId, options).list(dir);
      if (options.json) return printJson(listing);
      const width = Math.max(0, ...listing.entries.map((e) => String(e.size).length));
      for (const e of listing.entries) {
        const kind = e.type === 'directory' ? 'd' : e.type === 'symlink' ? 'l' : e.type === 'file' ? '-' : '?';
        const name = e.type === 'directory' ? `${e.name}/` : e.name;
        process.stdout.write(`${kind}${permissions(e.mode)} ${String(e.size).padStart(width)} ${e.mtime.slice(0, 16).replace('T', ' ')} ${name}\n`);
      }
      if (listing.truncated) process.stderr.write(`roomkit: only the first ${listing.entries.length} entries of ${listing.path} are listed\n`);
    }));

  roomCommand(program, 'rm <room> <path>', 'delete a file (or link) in the instance; remove directories with exec')
    .action(run(async (roomId: string, path: string, options: RoomOptions) => {
      const deleted = await roomOf(roomId, options).deleteFile(path);
      if (options.json) return printJson(deleted);
      process.stdout.write(`deleted ${deleted.file_path}\n`);
    }));

  roomCommand(program, 'revert <room> <command_id>', 'put back the files one command (run with keep_undo) created, modified or deleted as they were before it')
    .option('--force', 'revert even when later commands changed some of the same files')
    .action(run(async (roomId: string, commandId: string, options: RoomOptions & { force?: boolean }) => {
      const reverted = await roomOf(roomId, options).command(commandId).revert({ force: options.force === true });
      if (options.json) return printJson(reverted);
      for (const f of reverted.files_changed) process.stdout.write(`${f.status}\t${f.path}\n`);
      process.stdout.write(`reverted command ${reverted.command_id}: ${reverted.files_changed_total} file(s) put back in ${reverted.duration_ms} ms\n`);
    }));

  roomCommand(program, 'url <room> <port>', 'print a signed URL that reaches a port of the instance without an API key (for a browser) until it expires')
    .option('--expires <seconds>', 'how long it works (default 3600; at most the server\'s ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S)', positiveInteger)
    .action(run(async (roomId: string, port: string, options: RoomOptions & { expires?: number }) => {
      if (!/^[0-9]{1,5}$/.test(port)) throw new ClientError('invalid_port', `a port is a whole number from 1 to 65535, got "${port}"`);
      const signed = await roomOf(roomId, options).ports.url(Number(port), options.expires === undefined ? {} : { expiresInS: options.expires });
      if (options.json) return printJson(signed);
      process.stdout.write(`${signed.url}\n`);
      process.stderr.write(`reaches port ${signed.port} of instance ${signed.instance_id} until ${signed.expires_at}; anyone with the URL can use it\n`);
    }));

  roomCommand(program, 'status [room]', 'show the room\'s instance, or without a room the organization\'s newest instances')
    .option('-l, --label <key=value>', 'without a room: only instances with this label (repeatable: all must match)', collectLabel)
    .action(run(async (roomId: string | undefined, options: RoomOptions & { label?: Record<string, string> }) => {
      if (roomId !== undefined) {
        const instance = await roomOf(roomId, options).get();
        if (options.json) return printJson(instance);
        return printInstance(instance);
      }
      const client = clientOf(options);
      const page = await client.instances.list({
        ...(options.profile === undefined ? {} : { profile: options.profile }),
        ...(options.label === undefined ? {} : { metadata: options.label }),
        limit: 20,
      });
      if (options.json) return printJson(page);
      if (page.instances.length === 0) return void process.stdout.write('no instances\n');
      const names = new Map((await client.profiles.list()).map((p) => [p.profile_id, p.name]));
      const rows = page.instances.map((i) => [i.room_id, i.state, i.instance_id, names.get(i.profile_id) ?? i.profile_id, i.created_at]);
      printTable(['ROOM', 'STATE', 'INSTANCE', 'PROFILE', 'CREATED'], rows);
    }));

  roomCommand(program, 'pause <room>', 'pause the room\'s instance: its machine stops, its files and memory stay (any later request resumes it)')
    .option('--no-memory', 'keep its files only: its processes end')
    .action(run(async (roomId: string, options: RoomOptions & { memory: boolean }) => {
      const instance = await roomOf(roomId, options).pause(options.memory ? {} : { memory: false });
      if (options.json) return printJson(instance);
      const kept = instance.pause?.memory_kept ? 'its memory and processes were kept' : 'its files were kept, its processes ended';
      const until = instance.pause?.remove_after ? `; removed after ${instance.pause.remove_after} unless resumed` : '';
      process.stdout.write(`${instance.state}: room ${roomId}, instance ${instance.instance_id} (${kept}${until})\n`);
    }));

  roomCommand(program, 'resume <room>', 'resume the room\'s paused instance and wait until it is ready')
    .action(run(async (roomId: string, options: RoomOptions) => {
      const instance = await roomOf(roomId, options).resume();
      if (options.json) return printJson(instance);
      const last = instance.state_history.at(-1);
      const lost = last?.reason_code === 'memory_lost' ? ` (${last.reason ?? 'its saved memory could not be restored'})` : '';
      process.stdout.write(`${instance.state}: room ${roomId}, instance ${instance.instance_id}${lost}\n`);
    }));

  roomCommand(program, 'keepalive <room>', 'move the deadline of the room\'s instance (its --timeout) to now + the timeout, and reset its idle time')
    .option('--timeout <seconds>', 'seconds from now (default: the --timeout it was created with)', positiveInteger)
    .action(run(async (roomId: string, options: RoomOptions & { timeout?: number }) => {
      const instance = await roomOf(roomId, options).keepAlive(options.timeout === undefined ? {} : { timeout_s: options.timeout });
      if (options.json) return printJson(instance);
      const until = instance.expires_at === null ? 'it has no deadline; its idle time starts again' : `it runs until ${instance.expires_at}`;
      process.stdout.write(`${instance.state}: room ${roomId}, instance ${instance.instance_id}: ${until}\n`);
    }));

  roomCommand(program, 'destroy <room>', 'stop the room\'s instance and remove it with everything it holds')
    .action(run(async (roomId: string, options: RoomOptions) => {
      let instance: Instance;
      try {
        instance = await roomOf(roomId, options).delete();
      } catch (err) {
        // Destroying what is already gone succeeds, so that scripts can run it twice.
        if (!(err instanceof RoomkitError && err.code === 'instance_not_found')) throw err;
        if (options.json) return printJson({ room_id: roomId, state: 'absent' });
        return void process.stderr.write(`room ${roomId} has no instance: nothing to destroy\n`);
      }
      if (options.json) return printJson(instance);
      process.stdout.write(`${instance.state}: room ${roomId}, instance ${instance.instance_id}${instance.failure_reason ? ` (${instance.failure_reason})` : ''}\n`);
    }));
}

/** A client command with the options every one of them takes. */
export function roomCommand(program: Command, nameAndArgs: string, description: string, extra: { json?: boolean } = {}): Command {
  const command = program
    .command(nameAndArgs)
    .description(description)
    .option('--url <url>', 'the roomkit server (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--api-key <key>', 'API key (env ROOMKIT_API_KEY, which keeps it out of the process list)')
    .option('--profile <profile>', 'profile id or name (default: default)');
  if (extra.json !== false) command.addOption(new Option('--json', 'print the API\'s JSON answer instead of text'));
  return command;
}

export function clientOf(options: ConnectionOptions): Roomkit {
  const apiKey = options.apiKey ?? process.env.ROOMKIT_API_KEY;
  if (apiKey === undefined || apiKey.trim() === '') {
    throw new ClientError('missing_api_key', 'no API key: set ROOMKIT_API_KEY or pass --api-key (`roomkit keys create --org NAME` makes one)');
  }
  try {
    return new Roomkit({ baseUrl: options.url, apiKey });
  } catch (err) {
    throw new ClientError('invalid_url', (err as Error).message);
  }
}

export function roomOf(roomId: string, options: RoomOptions): Room {
  return clientOf(options).room(options.profile ?? 'default', roomId);
}

/** Wraps an action: SDK and client failures become one line on stderr and an exit code. */
export function run<A extends unknown[]>(action: (...args: A) => Promise<void>, failureExit = 1): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const options = args.find((a): a is ConnectionOptions => typeof a === 'object' && a !== null && !Array.isArray(a)) as ConnectionOptions | undefined;
    try {
      await action(...args);
    } catch (err) {
      if (!(err instanceof RoomkitError || err instanceof RoomkitConnectionError || err instanceof ClientError)) throw err;
      const roomId = typeof args[0] === 'string' ? args[0] : undefined;
      const details = err instanceof RoomkitError ? err.details : undefined;
      process.stderr.write(`roomkit: error ${err.code}: ${cliMessage(err.code, err.message, roomId, (options as RoomOptions | undefined)?.profile, details)}\n`);
      if (options?.json) {
        const requestId = err instanceof RoomkitError ? err.requestId : undefined;
        printJson({ error: err.code, message: err.message, ...(details ? { details } : {}), ...(requestId ? { request_id: requestId } : {}) });
      }
      process.exitCode = err instanceof ClientError && failureExit === 1 ? err.exitCode : failureExit;
    }
  };
}

/**
 * The server's messages advise REST calls with UUIDs; on the command line the same
 * advice is a roomkit command with names. Codes without a CLI form keep the message.
 */
function cliMessage(code: string, message: string, roomId: string | undefined, profile: string | undefined, details: Record<string, unknown> | undefined): string {
  const of = profile === undefined ? '' : ` --profile ${profile}`;
  const first = message.split(';')[0];
  switch (code) {
    case 'instance_not_found':
      return roomId === undefined ? message : `no instance in room "${roomId}"; create one with \`roomkit create${of} ${roomId}\``;
    case 'instance_not_ready':
      if (roomId === undefined) return message;
      return /failed/.test(message)
        ? `${message.split(';')[0]}; \`roomkit destroy${of} ${roomId}\`, then \`roomkit create${of} ${roomId}\``
        : `${message.split(';')[0]}; \`roomkit status${of} ${roomId}\` shows its state, or wait with \`roomkit create${of} ${roomId}\``;
    case 'profile_not_found':
      return profile === undefined ? message : `${message}; leave out --profile to use "default"`;
    case 'instance_options_conflict':
      if (roomId === undefined) return message;
      return `${message.split(';')[0]}; \`roomkit keepalive${of} ${roomId} --timeout S\` moves its deadline, or \`roomkit destroy${of} ${roomId}\` and create it again with the new options`;
    case 'room_occupied': {
      const occupied = typeof details?.room_id === 'string' ? details.room_id : roomId;
      return occupied === undefined ? message : `${first}; \`roomkit destroy${of} ${occupied}\` first, or use another room`;
    }
    case 'snapshot_not_found':
      return `${first}; \`roomkit snapshots\` lists them`;
    case 'snapshot_unusable':
      return typeof details?.snapshot_id === 'string' ? `${first}; retry once \`roomkit snapshots show ${details.snapshot_id}\` says ready` : message;
    case 'instance_state_conflict':
      // "poll GET …" becomes the command that shows the state; other advice stays.
      if (roomId === undefined || !message.includes('poll GET')) return message;
      return `${message.split(/;? poll GET| \(poll GET/)[0]}; \`roomkit status${of} ${roomId}\` shows its state`;
    default:
      return message;
  }
}

/** Instance progress on stderr: a spinner on a terminal, otherwise one line per change. */
class Progress {
  readonly #room: string;
  readonly #started = Date.now();
  readonly #tty = process.stderr.isTTY === true;
  #text = '';
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;
  #reported = false;

  constructor(room: string) {
    this.#room = room;
  }

  /** Whether the instance was seen starting (a room's live instance is found ready at once). */
  get reported(): boolean {
    return this.#reported;
  }

  update(instance: Instance): void {
    if (!this.#reported && instance.state === 'ready') return;
    this.#reported = true;
    const step = (PROVISION_STATES as readonly string[]).indexOf(instance.state);
    const position = step === -1 ? '' : ` (${step + 1}/${PROVISION_STATES.length})`;
    this.#text = `${this.#room}: ${instance.state}${position}${instance.progress ? `: ${instance.progress}` : ''}`;
    if (!this.#tty) {
      process.stderr.write(`${this.#text}${instance.state === 'ready' ? ` in ${this.elapsed()}` : ''}\n`);
      return;
    }
    this.#timer ??= setInterval(() => this.#draw(), 80);
    this.#draw();
  }

  #draw(): void {
    // A pseudo-terminal may report no width at all.
    const columns = process.stderr.columns > 20 ? process.stderr.columns : 80;
    const line = `${SPINNER[this.#frame++ % SPINNER.length]} ${this.#text} ${this.elapsed()}`;
    process.stderr.write(`\r\x1b[2K${line.slice(0, columns - 1)}`);
  }

  stop(): void {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    process.stderr.write('\r\x1b[2K');
  }

  elapsed(): string {
    return `${((Date.now() - this.#started) / 1000).toFixed(1)} s`;
  }
}

/** After a command's output: what it changed and anything unusual, on stderr. */
function reportCommand(result: CommandResult): void {
  const r = result.result;
  if (r.output !== '' && !r.output.endsWith('\n') && process.stdout.isTTY) process.stdout.write('\n');
  if (r.timed_out) process.stderr.write(`roomkit: the command reached its time limit and was killed (exit code ${r.exit_code})\n`);
  if (r.output_truncated) process.stderr.write(`roomkit: the result kept only the start and end of ${formatBytes(r.output_bytes, 'listing')} of output\n`);
  if (r.files_changed.length === 0) return;
  const lines = r.files_changed.map((c) => `  ${c.status.padEnd(8)} ${c.path}${c.size === undefined ? '' : ` (${formatBytes(c.size, 'listing')})`}`);
  const more = r.files_changed_truncated ? `\n  ... and ${r.files_changed_total - r.files_changed.length} more` : '';
  process.stderr.write(`files changed:\n${lines.join('\n')}${more}\n`);
}

function printInstance(instance: Instance): void {
  const rows: [string, string][] = [
    ['room', instance.room_id],
    ['profile', instance.profile_id],
    ['instance', instance.instance_id],
    ['state', instance.state + (instance.progress ? ` (${instance.progress})` : '')],
    ['runtime', instance.runtime],
    ['resources', `${instance.resources.memory_mb} MiB memory, ${instance.resources.vcpus} vCPU, ${instance.resources.disk_mb} MiB disk`],
    ['created', instance.created_at],
  ];
  if (instance.claimed_at !== null) rows.push(['claimed', `${instance.claimed_at} (from the profile's warm pool)`]);
  if (instance.failure_reason) rows.push(['failure', instance.failure_reason]);
  const labels = Object.entries(instance.metadata);
  if (labels.length > 0) rows.push(['labels', labels.map(([k, v]) => `${k}=${v}`).join(', ')]);
  if (instance.env_names.length > 0) rows.push(['env', `${instance.env_names.join(', ')} (values not shown)`]);
  if (instance.expires_at !== null) rows.push(['expires', `${instance.expires_at} (timeout ${instance.timeout_s ?? '-'} s; roomkit keepalive moves it)`]);
  for (const [name, value] of rows) process.stdout.write(`${name.padEnd(10)} ${value}\n`);
}

export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  for (const row of [header, ...rows]) process.stdout.write(`${row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** `rwxr-xr-x` from octal permission bits. */
function permissions(mode: string): string {
  const bits = Number.parseInt(mode, 8);
  if (Number.isNaN(bits)) return mode;
  return [6, 3, 0].map((shift) => ((bits >> shift) & 4 ? 'r' : '-') + ((bits >> shift) & 2 ? 'w' : '-') + ((bits >> shift) & 1 ? 'x' : '-')).join('');
}


function positiveInteger(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) throw new InvalidArgumentError('expected a whole number of seconds');
  return Number(value);
}

function collectEnv(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected NAME=VALUE');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

function collectLabel(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

async function readLocal(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ClientError('local_file', `cannot read ${path}: ${(err as Error).message}`, 1);
  }
}

/** All of stdin; with `maxBytes`, more than that is refused before it is all read. */
async function readStdin(maxBytes = Infinity): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin) {
    total += (chunk as Buffer).length;
    if (total > maxBytes) {
      throw new ClientError('stdin_too_large', `stdin is more than ${formatBytes(maxBytes, 'listing')}; put the input in the instance with \`roomkit put\` and redirect it in the command`, 1);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
