// The command commands of `roomkit`: `exec ROOM CMD` (in the foreground, streaming its
// output, or with --background), `commands ROOM [ID]` (the room's history, or one
// command's output and end, --follow to wait for it), `kill ROOM ID` and `revert ROOM
// ID`. Output follows the other client commands (client.ts): results on stdout, notes on
// stderr, failures as one line.
import type { Command } from 'commander';
import { formatBytes } from '../lib/format-size.ts';
import type { CommandResult, CommandStatus, Room } from '../../sdk/src/index.ts';
import { ClientError, collectEnv, positiveInteger, printJson, printTable, readStdin, roomCommand, roomOf, run, type RoomOptions } from './client.ts';

/** roomkit's own failure during `exec`, told apart from the command's exit codes (as `docker run` does). */
const EXEC_FAILURE_EXIT = 125;
/** Most of roomkit's stdin `exec` reads for the command: the largest input a server may be set to take. */
const MAX_STDIN_READ_BYTES = 64 * 1024 * 1024;
/** How often `commands --follow` asks for more output. */
const FOLLOW_POLL_MS = 500;

type ExecOptions = RoomOptions & { timeout?: number; idleOutputTimeout?: number; cwd?: string; env?: Record<string, string>; stdin: boolean; background?: boolean };

export function registerExecCommands(program: Command): void {
  roomCommand(program, 'exec <room> <command...>', 'run a shell command in the room\'s instance and exit with its exit code')
    .usage('[options] <room> <command...>')
    .addHelpText('after', '\nOptions go before the command: before the room or right after it. The first word that is not one of\n' +
      'roomkit\'s options starts the command, and everything from there on is the command\'s (put it after -- when it\n' +
      'starts with a dash).\n' +
      'Human output: what the command writes to stdout and stderr as it is printed, on roomkit\'s stdout and stderr\n' +
      '(both on stdout for an instance without roomkit\'s agent, which cannot tell them apart), then the files it changed\n' +
      'and the command\'s id (for `roomkit revert` and `roomkit commands`) on stderr.\n' +
      'Input: when roomkit\'s stdin is not a terminal (a pipe or a file), all of it is read and given to the command\'s stdin\n' +
      '(at most the server\'s ROOMKIT_MAX_STDIN_BYTES, 1 MiB by default); --no-stdin leaves it unread. On a terminal the command\'s stdin is empty.\n' +
      `Exit code: the command's own; ${EXEC_FAILURE_EXIT} when roomkit itself failed; 2 for a usage error.`)
    .option('--timeout <seconds>', 'time limit (default and maximum: the profile\'s command_timeout_s; none with --background)', positiveInteger)
    .option('--idle-output-timeout <seconds>', 'kill it once it prints nothing this long (default: the profile\'s command_idle_output_timeout_s)', positiveInteger)
    .option('--cwd <dir>', 'working directory, absolute or relative to the home directory')
    .option('-e, --env <NAME=VALUE>', 'an environment variable (repeatable)', collectEnv)
    .option('--no-stdin', 'do not read roomkit\'s stdin (the command\'s is empty), e.g. in a loop that reads from a pipe')
    .option('--background', 'start it and print its id at once; `roomkit commands ROOM ID --follow` shows its output, `roomkit kill ROOM ID` ends it')
    .passThroughOptions()
    .action(run(async function (this: Command, roomId: string, words: string[], options: ExecOptions) {
      // Options right after the room are roomkit's (`exec ROOM --json ls`); parsing stops
      // at the command's first word, and `--` ends roomkit's options.
      const { operands, unknown } = this.parseOptions(words);
      if (unknown.length > 0 && unknown[0]!.startsWith('-')) {
        throw new ClientError('validation_error', `unknown option ${unknown[0]}: roomkit's options go before the command; put a command that starts with a dash after --, e.g. roomkit exec ${roomId} -- ${unknown.join(' ')}`);
      }
      const command = [...operands, ...unknown].join(' ');
      if (command.trim() === '') throw new ClientError('validation_error', 'no command: give it after the room, e.g. roomkit exec ROOM ls -la');
      const room = roomOf(roomId, options);
      // Piped or redirected input is the command's; a terminal's is not read (there is no end to wait for).
      const stdin = options.stdin && !process.stdin.isTTY ? await readStdin(MAX_STDIN_READ_BYTES) : undefined;
      const execOptions = {
        ...(options.timeout === undefined ? {} : { timeout_s: options.timeout }),
        ...(options.idleOutputTimeout === undefined ? {} : { idle_output_timeout_s: options.idleOutputTimeout }),
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        ...(options.env === undefined ? {} : { env: options.env }),
        ...(stdin === undefined || stdin.length === 0 ? {} : { stdin: new Uint8Array(stdin) }),
      };
      if (options.background) {
        const handle = await room.execBackground(command, execOptions);
        if (options.json) return printJson(handle.last);
        process.stdout.write(`${handle.commandId}\n`);
        const of = profileOption(options);
        process.stderr.write(
          `running in the background: \`roomkit commands${of} ${roomId} ${handle.commandId} --follow\` shows its output, \`roomkit kill${of} ${roomId} ${handle.commandId}\` ends it\n`,
        );
        return;
      }
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
        reportCommand(result, roomId, options);
      }
      process.exitCode = result.result.exit_code;
    }, EXEC_FAILURE_EXIT));

  roomCommand(program, 'commands <room> [command_id]', 'list the room\'s commands, newest first; with an id, print that command\'s output and how it ended')
    .option('--follow', 'with an id: print its output as it comes until it ends, then exit with its exit code')
    .option('--limit <n>', 'without an id: how many to list (default 20)', positiveInteger)
    .action(run(async (roomId: string, commandId: string | undefined, options: RoomOptions & { follow?: boolean; limit?: number }) => {
      const room = roomOf(roomId, options);
      if (commandId === undefined) return listCommands(room, options);
      const status = options.follow ? await follow(room, commandId, options.json === true) : await room.command(commandId).status({ offset: 0 });
      if (options.json) return printJson(status);
      if (!options.follow) process.stdout.write(status.output);
      describeEnd(status, roomId, options);
      if (status.exit_code !== null) process.exitCode = status.exit_code;
    }));

  roomCommand(program, 'kill <room> <command_id>', 'signal a running command of the room (every process it started)')
    .option('--signal <name>', 'KILL (default), TERM, INT, HUP, QUIT, USR1 or USR2')
    .action(run(async (roomId: string, commandId: string, options: RoomOptions & { signal?: string }) => {
      const status = await roomOf(roomId, options).command(commandId).kill((options.signal ?? 'KILL').toUpperCase() as Parameters<ReturnType<Room['command']>['kill']>[0]);
      if (options.json) return printJson(status);
      process.stdout.write(`${status.state}: command ${status.command_id}${status.exit_code === null ? '' : ` (exit code ${status.exit_code})`}\n`);
    }));

  roomCommand(program, 'revert <room> <command_id>', 'put back the files one command (run with keep_undo) created, modified or deleted as they were before it')
    .option('--force', 'revert even when later commands changed some of the same files')
    .action(run(async (roomId: string, commandId: string, options: RoomOptions & { force?: boolean }) => {
      const reverted = await roomOf(roomId, options).command(commandId).revert({ force: options.force === true });
      if (options.json) return printJson(reverted);
      for (const f of reverted.files_changed) process.stdout.write(`${f.status}\t${f.path}\n`);
      process.stdout.write(`reverted command ${reverted.command_id}: ${reverted.files_changed_total} file(s) put back in ${reverted.duration_ms} ms\n`);
    }));
}

async function listCommands(room: Room, options: RoomOptions & { limit?: number }): Promise<void> {
  const page = await room.commands({ limit: options.limit ?? 20 });
  if (options.json) return printJson(page);
  if (page.commands.length === 0) return void process.stdout.write('no commands\n');
  const rows = page.commands.map((c) => [
    c.command_id,
    c.state,
    c.exit_code === null ? '-' : String(c.exit_code),
    c.started_at,
    c.duration_ms === null ? '-' : `${c.duration_ms} ms`,
    oneLine(c.command, 60),
  ]);
  printTable(['COMMAND', 'STATE', 'EXIT', 'STARTED', 'TOOK', 'RUN'], rows);
  if (page.next_cursor !== null) process.stderr.write(`roomkit: older commands are not shown; --limit N shows more\n`);
}

/** Prints a command's output as it comes (unless `quiet`) until it ends; its last status. */
async function follow(room: Room, commandId: string, quiet: boolean): Promise<CommandStatus> {
  const handle = room.command(commandId);
  let offset = 0;
  for (;;) {
    const status = await handle.status({ offset });
    if (!quiet) process.stdout.write(status.output);
    offset = status.next_offset;
    if (status.state !== 'running') return status;
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
  }
}

/** How a command ended (or that it runs), with the files it changed, on stderr. */
function describeEnd(status: CommandStatus, roomId: string, options: RoomOptions): void {
  if (!status.output_available) process.stderr.write('roomkit: its output is no longer kept (15 minutes after its end, or the server restarted)\n');
  if (status.state === 'running') {
    process.stderr.write(`running since ${status.started_at}: --follow waits for its end\n`);
    return;
  }
  const took = status.duration_ms === null ? '' : ` after ${status.duration_ms} ms`;
  process.stderr.write(`${status.state}${status.exit_code === null ? '' : ` with exit code ${status.exit_code}`}${took}\n`);
  if (status.result) reportCommand(status.result, roomId, options);
}

/** After a command's output: what it changed, its id and anything unusual, on stderr. */
export function reportCommand(result: CommandResult, roomId: string, options: RoomOptions): void {
  const r = result.result;
  if (r.output !== '' && !r.output.endsWith('\n') && process.stdout.isTTY) process.stdout.write('\n');
  if (r.end_reason === 'no_output') {
    process.stderr.write(`roomkit: the command printed nothing for its silence limit and was killed (exit code ${r.exit_code}); give it a longer --idle-output-timeout\n`);
  } else if (r.timed_out) {
    process.stderr.write(`roomkit: the command reached its time limit and was killed (exit code ${r.exit_code}); run long work with \`roomkit exec --background${profileOption(options)} ${roomId} …\`\n`);
  }
  if (r.output_truncated) process.stderr.write(`roomkit: the result kept only the start and end of ${formatBytes(r.output_bytes, 'listing')} of output\n`);
  if (r.files_changed.length === 0) return;
  const lines = r.files_changed.map((c) => `  ${c.status.padEnd(8)} ${c.path}${c.size === undefined ? '' : ` (${formatBytes(c.size, 'listing')})`}`);
  const more = r.files_changed_truncated ? `\n  ... and ${r.files_changed_total - r.files_changed.length} more` : '';
  process.stderr.write(`files changed by command ${result.command_id}:\n${lines.join('\n')}${more}\n`);
}

function profileOption(options: RoomOptions): string {
  return options.profile === undefined ? '' : ` --profile ${options.profile}`;
}

function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
