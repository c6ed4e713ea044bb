// The client commands of `roomkit` about a room's instance (create, status, url, pause,
// resume, keepalive, destroy), and what every client command shares: its connection
// options, the SDK client, the wrapper that turns failures into one line and an exit
// code, and printing. The commands of commands are in exec.ts, of files in files.ts, of
// profiles in profiles.ts, of snapshots and fork in snapshots.ts. They work through the
// SDK against a running server: results go to stdout (as JSON with --json), progress and
// notes to stderr; a failure is one line `roomkit: error <code>: <message>` on stderr
// and a non-zero exit.
import { readFile } from 'node:fs/promises';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { PROVISION_STATES } from '../core/lifecycle.ts';
import { formatBytes } from '../lib/format-size.ts';
import { type ErrorHint, type Instance, type Room, Roomkit, RoomkitConnectionError, RoomkitError } from '../../sdk/src/index.ts';
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
export function run<A extends unknown[]>(action: (this: Command, ...args: A) => Promise<void>, failureExit = 1): (this: Command, ...args: A) => Promise<void> {
  // A function, not an arrow: commander calls an action with its Command as `this`.
  return async function (this: Command, ...args: A) {
    const options = args.find((a): a is ConnectionOptions => typeof a === 'object' && a !== null && !Array.isArray(a)) as ConnectionOptions | undefined;
    try {
      await action.apply(this, args);
    } catch (err) {
      if (!(err instanceof RoomkitError || err instanceof RoomkitConnectionError || err instanceof ClientError)) throw err;
      const roomId = typeof args[0] === 'string' ? args[0] : undefined;
      const details = err instanceof RoomkitError ? err.details : undefined;
      const hinted = err instanceof RoomkitError && err.hint !== undefined && err.problem !== undefined ? { problem: err.problem, hint: err.hint } : undefined;
      process.stderr.write(`roomkit: error ${err.code}: ${cliMessage(err.code, err.message, roomId, (options as RoomOptions | undefined)?.profile, details, hinted)}\n`);
      if (options?.json) {
        const requestId = err instanceof RoomkitError ? err.requestId : undefined;
        printJson({ error: err.code, message: err.message, ...(details ? { details } : {}), ...(requestId ? { request_id: requestId } : {}) });
      }
      // A usage error found before asking the server exits 2, exec's included; other
      // failures of roomkit exit with the command's failure code (exec: 125).
      process.exitCode = err instanceof ClientError && (err.exitCode === 2 || failureExit === 1) ? err.exitCode : failureExit;
    }
  };
}

/**
 * The server's messages advise REST calls with UUIDs; on the command line the same
 * advice is a roomkit command with names. Codes without a CLI form keep the message.
 */
function cliMessage(
  code: string,
  message: string,
  roomId: string | undefined,
  profile: string | undefined,
  details: Record<string, unknown> | undefined,
  hinted?: { problem: string; hint: ErrorHint },
): string {
  const of = profile === undefined ? '' : ` --profile ${profile}`;
  const first = hinted?.problem ?? message.split(';')[0];
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
      if (hinted && CLI_HINTS[hinted.hint.code]) return CLI_HINTS[hinted.hint.code]!(hinted.problem, hinted.hint, roomId ?? 'ROOM', of);
      // "poll GET …" becomes the command that shows the state; other advice stays.
      if (roomId === undefined || !message.includes('poll GET')) return message;
      return `${message.split(/;? poll GET| \(poll GET/)[0]}; \`roomkit status${of} ${roomId}\` shows its state`;
    default: {
      // The advice the server gives as data, as a roomkit command where there is one; the
      // problem alone where the advice is an API call the command line has no word for.
      if (hinted) return CLI_HINTS[hinted.hint.code]?.(hinted.problem, hinted.hint, roomId ?? 'ROOM', of) ?? hinted.problem;
      // The API's advice to send "background": true is a flag here.
      return message.replace('start the work with "background": true', 'start the work with `roomkit exec --background`');
    }
  }
}

/** The server's hints (its errors' advice as data) as roomkit commands. */
const CLI_HINTS: Record<string, (problem: string, hint: ErrorHint, room: string, of: string) => string> = {
  create_instance: (p, _h, room, of) => `${p}; create one with \`roomkit create${of} ${room}\``,
  create_new_instance: (p, _h, room, of) => `${p}; create a new one with \`roomkit create${of} ${room}\``,
  recreate_failed_instance: (p, _h, room, of) => `${p}; \`roomkit destroy${of} ${room}\`, then \`roomkit create${of} ${room}\``,
  wait_until_ready: (p, _h, room, of) => `${p}; \`roomkit create${of} ${room}\` waits until it is ready`,
  poll_until: (p, h, room, of) => `${p}; \`roomkit status${of} ${room}\` shows when it is "${h.until}"`,
  poll_state: (p, _h, room, of) => `${p} (\`roomkit status${of} ${room}\` shows its state)`,
  poll_and_retry: (p, _h, room, of) => `${p}; \`roomkit status${of} ${room}\` shows its state: retry then`,
  delete_instance_first: (p, h, room, of) => `${p}; \`roomkit destroy${of} ${room}\` first to ${h.asked}, or use another room`,
  list_commands: (p, _h, room, of) => `${p}; \`roomkit commands${of} ${room}\` lists them`,
  kill_a_command: (p, _h, room, of) => `${p}; wait for one to finish, or end one with \`roomkit kill${of} ${room} COMMAND_ID\` (\`roomkit commands${of} ${room}\` lists them)`,
  command_in_file: (p, _h, room, of) => `${p}; put long scripts in a file with \`roomkit put${of} ${room} LOCAL REMOTE\` and run that`,
  stdin_in_file: (p, _h, room, of) => `${p}; put the input in a file with \`roomkit put${of} ${room} LOCAL REMOTE\` and redirect it (\`cmd < file\`)`,
  env_in_file: (p, _h, room, of) => `${p}; put large values in a file with \`roomkit put${of} ${room} LOCAL REMOTE\``,
  enable_keep_undo: (p, h) => `${p}. \`roomkit profiles update ${h.profile_id ?? 'PROFILE'} --keep-undo\`, then destroy the instance and create it again`,
  list_snapshots: (p) => `${p}; \`roomkit snapshots\` lists them`,
  snapshot_ready_later: (p, h) => `${p}; retry once \`roomkit snapshots show ${h.snapshot_id}\` says ready`,
  sign_port_url: (p, h, room, of) => `${p}; get a new one with \`roomkit url${of} ${room} ${h.port ?? 'PORT'}\``,
};

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

export function positiveInteger(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) throw new InvalidArgumentError('expected a whole number of seconds');
  return Number(value);
}

export function collectEnv(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected NAME=VALUE');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

export function collectLabel(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

export async function readLocal(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ClientError('local_file', `cannot read ${path}: ${(err as Error).message}`, 1);
  }
}

/** All of stdin; with `maxBytes`, more than that is refused before it is all read. */
export async function readStdin(maxBytes = Infinity): Promise<Buffer> {
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
