// `roomkit shell ROOM`: an interactive terminal in the room's instance, through the SDK.
// On a terminal, the local one is put in raw mode (every key, Ctrl-C included, goes to
// the instance), follows the window's size, and is restored however the shell ends.
// Off a terminal (piped input) the input is passed on as it is, then ends of input (^D).
// The exit code is the remote program's.
import type { Command } from 'commander';
import { TerminalClosedError } from '../../sdk/src/index.ts';
import { ClientError, type RoomOptions, roomCommand, roomOf, run } from './client.ts';

/** roomkit's own failure, told apart from the shell's exit codes (as `exec` does). */
const SHELL_FAILURE_EXIT = 125;
/** ^D: the end of input on a terminal. */
const END_OF_INPUT = '\x04';
/** How often ^D is typed again after piped input ended, until the terminal ends. */
const END_OF_INPUT_REPEAT_MS = 1000;

export function registerShellCommand(program: Command): void {
  roomCommand(program, 'shell <room>', 'open an interactive terminal (the login shell) in the room\'s instance', { json: false })
    .option('-c, --command <command>', 'run this on the terminal instead of the login shell')
    .option('--attach <terminal_id>', 'attach again to a terminal closed by a pause of its instance (the same shell)')
    .addHelpText(
      'after',
      '\nOn a terminal, keys go to the instance as typed (Ctrl-C too); the shell\'s `exit` ends the session.\n' +
        'With piped input, the input is typed into the shell, then an end of input (^D).\n' +
        `Exit code: the shell's (or the command's) own; ${SHELL_FAILURE_EXIT} when roomkit itself failed or the terminal was closed.`,
    )
    .action(run(async (roomId: string, options: RoomOptions & { command?: string; attach?: string }) => {
      const stdin = process.stdin;
      const stdout = process.stdout;
      const tty = stdin.isTTY === true;
      const size = () => ({ cols: stdout.columns > 0 ? stdout.columns : 80, rows: stdout.rows > 0 ? stdout.rows : 24 });
      const terminal = await roomOf(roomId, options).terminal({
        ...(tty ? size() : {}),
        ...(options.command === undefined ? {} : { command: options.command }),
        ...(options.attach === undefined ? {} : { terminalId: options.attach }),
      });
      let spoke = false;
      let spoken: () => void = () => {};
      const firstOutput = new Promise<void>((resolve) => (spoken = resolve));
      terminal.onData((data) => {
        stdout.write(data);
        if (!spoke) (spoke = true), spoken();
      });
      const onResize = () => {
        const { cols, rows } = size();
        terminal.resize(cols, rows);
      };
      if (tty) {
        stdin.setRawMode(true);
        stdout.on('resize', onResize);
      }
      stdin.on('data', (chunk: Buffer) => terminal.write(chunk));
      // A ^D typed before the shell reads its terminal in raw mode is lost (the line
      // discipline's end-of-file mark does not survive the switch), and one typed while a
      // program runs ends that program, not the shell: after the input, ^D is typed once
      // the terminal has printed something and again every second until it ends.
      let endOfInput: NodeJS.Timeout | undefined;
      if (!tty) {
        stdin.once('end', () => {
          void firstOutput.then(() => {
            terminal.write(END_OF_INPUT);
            endOfInput = setInterval(() => terminal.write(END_OF_INPUT), END_OF_INPUT_REPEAT_MS);
          });
        });
      }
      stdin.resume();
      try {
        process.exitCode = await terminal.exited;
      } catch (err) {
        if (!(err instanceof TerminalClosedError)) throw err;
        // A pause with memory keeps the shell: say how to get back to it.
        const again = err.terminalId === undefined ? '' : `; attach again with: roomkit shell ${roomId} --attach ${err.terminalId}`;
        throw new ClientError(err.reason, `${err.message}${again}`, SHELL_FAILURE_EXIT);
      } finally {
        clearInterval(endOfInput);
        if (tty) {
          stdin.setRawMode(false);
          stdout.off('resize', onResize);
        }
        stdin.pause();
        stdin.destroy();
      }
    }, SHELL_FAILURE_EXIT));
}
