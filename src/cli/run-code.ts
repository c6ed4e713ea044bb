// `roomkit run-code ROOM CODE|-`: runs a cell of code in a code context of the room's
// instance (the SDK's room.contexts), printing what it prints as it prints it, then its
// results and its exception. Without --context it runs in the room's oldest context of
// the language, made the first time, so one run's variables are there for the next, as
// in a notebook.
import type { Command } from 'commander';
import type { CodeContext, ContextRunResult, DisplayResult, Room } from '../../sdk/src/index.ts';
import { ClientError, collectEnv, positiveInteger, printJson, readStdin, roomCommand, roomOf, run, type RoomOptions } from './client.ts';

/** roomkit's own failure, told apart from the code's exception (1), as `exec` does. */
const RUN_CODE_FAILURE_EXIT = 125;
/** Largest cell the server takes (MAX_CODE_BYTES). */
const MAX_CODE_READ_BYTES = 1024 * 1024;
const LANGUAGES = ['python', 'javascript', 'bash'];

type RunCodeOptions = RoomOptions & { language?: string; context?: string; timeout?: number; env?: Record<string, string> };

export function registerRunCodeCommand(program: Command): void {
  roomCommand(program, 'run-code <room> <code>', 'run code in a live interpreter of the room\'s instance that keeps its variables between runs')
    .addHelpText('after', '\nCODE is the code itself, or - to read it from stdin (a file: roomkit run-code ROOM - < analysis.py).\n' +
      'Without --context it runs in the room\'s oldest context of the language, made at the first run and kept,\n' +
      'so a variable set by one run is there for the next; its id is printed on stderr.\n' +
      'Output: what the code prints, on stdout and stderr as it prints it; then each result it shows (the value of its\n' +
      'last expression, display() calls) as text, an image as the file it was written to in the instance; an\n' +
      'exception\'s traceback on stderr.\n' +
      `Exit code: 0; 1 when the code raised an exception (or was interrupted); ${RUN_CODE_FAILURE_EXIT} when roomkit itself failed; 2 for a usage error.`)
    .option('--language <language>', `the context's language: ${LANGUAGES.map((l, i) => (i === 0 ? `${l} (default)` : l)).join(', ')}`)
    .option('--context <id>', 'run in this context (from a previous run, or GET …/contexts) instead of the room\'s default one')
    .option('--timeout <seconds>', 'time limit (default and maximum: the profile\'s command_timeout_s); at the limit the code is interrupted', positiveInteger)
    .option('-e, --env <NAME=VALUE>', 'an environment variable for this run only (repeatable)', collectEnv)
    .action(run(async (roomId: string, code: string, options: RunCodeOptions) => {
      if (options.context !== undefined && options.language !== undefined) {
        throw new ClientError('validation_error', '--context and --language do not go together: a context has its language');
      }
      const source = code === '-' ? (await readStdin(MAX_CODE_READ_BYTES)).toString('utf8') : code;
      const room = roomOf(roomId, options);
      const context = options.context === undefined ? await defaultContext(room, options.language ?? 'python', options.json === true) : await room.contexts.get(options.context);
      const runOptions = {
        ...(options.timeout === undefined ? {} : { timeoutS: options.timeout }),
        ...(options.env === undefined ? {} : { env: options.env }),
      };
      // Interrupting roomkit (Ctrl-C) interrupts the code: the request goes away, which the server reads as an interrupt.
      const result = options.json
        ? await context.run(source, runOptions)
        : await context.run(source, {
          ...runOptions,
          onStdout: (text) => process.stdout.write(text),
          onStderr: (text) => process.stderr.write(text),
        });
      if (options.json) printJson(result);
      else report(result);
      if (result.error !== null) process.exitCode = 1;
    }, RUN_CODE_FAILURE_EXIT));
}

/** The room's oldest context of the language, or a new one. */
async function defaultContext(room: Room, language: string, quiet: boolean): Promise<CodeContext> {
  const found = (await room.contexts.list()).find((c) => c.language === language);
  if (found) return found;
  const made = await room.contexts.create({ language });
  if (!quiet) process.stderr.write(`roomkit: started a ${language} context ${made.contextId}; later runs in this room use it\n`);
  return made;
}

/** Results and the exception, after the output printed as it came. */
function report(result: ContextRunResult): void {
  for (const shown of result.results) process.stdout.write(`${describe(shown)}\n`);
  if (result.error !== null) {
    const { name, value, traceback } = result.error;
    process.stderr.write(traceback.trim() === '' ? `${name}: ${value}\n` : `${traceback.replace(/\n?$/, '\n')}`);
  }
  if (result.restarted) process.stderr.write('roomkit: the context\'s interpreter was started again: its variables are gone\n');
  if (result.timed_out) process.stderr.write('roomkit: the run reached its time limit and was interrupted\n');
}

function describe(shown: DisplayResult): string {
  const image = shown.png !== undefined ? 'png' : shown.jpeg !== undefined ? 'jpeg' : undefined;
  if (image !== undefined) return `[${image} image${shown.path === undefined ? '' : `: ${shown.path}`}]`;
  return shown.text ?? (shown.html !== undefined ? '[html]' : '[a result without text]');
}
