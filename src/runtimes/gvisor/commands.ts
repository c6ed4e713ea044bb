// Runs one shell command in a gVisor instance: `runsc exec` as the VM user with stdout
// and stderr on one pipe, output kept within its budget, and a deadline after which
// every process the command started is killed, wherever it went.
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { HeadTailBuffer } from '../../host/output.ts';

/** The environment variable that marks every process of a command (inherited by its children). */
export const COMMAND_MARKER = 'ROOMKIT_COMMAND_ID';
/** Exit code reported for a command killed at its deadline (as timeout(1) does). */
export const TIMEOUT_EXIT_CODE = 124;
/**
 * After the command's shell exits, its output keeps arriving for a while: `runsc exec`
 * reports the exit before the sandbox has passed on everything the command wrote (under
 * load, megabytes of it for hundreds of milliseconds). The output ends when the pipe
 * closes; but processes the command left in the background hold the pipe open for as
 * long as they run. So after the exit the result waits for the pipe to close, or for it
 * to stay quiet this long, or at most OUTPUT_DRAIN_MAX_MS; what background processes
 * print after that is not part of the result.
 */
const OUTPUT_QUIET_MS = 300;
const OUTPUT_DRAIN_MAX_MS = 5_000;
/** After the kill at the deadline, how long runsc exec may take to report before it is killed too. */
const KILL_GRACE_MS = 5_000;
/** Pipes of background processes kept open per instance; the oldest is closed beyond it. */
const MAX_LINGERING_PIPES = 64;

/**
 * Run as root in the guest with the command id and a signal name: signals every process
 * carrying the command's marker and every process in their sessions (which covers
 * children that cleared their environment). For KILL, again until none is left, since a
 * process may fork while this runs; other signals are sent once, since their receivers
 * may rightly go on. Prints how many processes it signalled. A process that called
 * setsid() and cleared its environment escapes.
 */
export const KILL_SCRIPT = String.raw`
marker="${COMMAND_MARKER}=$1"
sig="$2"
i=0
hit=0
while [ $i -lt 40 ]; do
  pids=$(grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3)
  if [ -z "$pids" ]; then echo $hit; exit 0; fi
  hit=$((hit + $(echo $pids | wc -w)))
  sids=$(ps -o sid= -p "$(echo $pids | tr ' ' ,)" 2>/dev/null | sort -u)
  kill -"$sig" $pids 2>/dev/null
  for s in $sids; do [ "$s" -gt 1 ] && pkill -"$sig" -s "$s"; done
  if [ "$sig" != KILL ]; then echo $hit; exit 0; fi
  i=$((i + 1))
  sleep 0.05
done
echo $hit
exit 1
`;
/** The longest delay a Node timer takes; a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export type ExecChild = ChildProcessByStdio<Writable, Readable, Readable>;

export interface RunOutcome {
  output: string;
  outputBytes: number;
  outputTruncated: boolean;
  exitCode: number;
  timedOut: boolean;
  /** The pipe is still held by processes the command left running; keep draining it. */
  lingering: Readable | null;
}

/**
 * Waits for a started `runsc exec` of a command (stdout and stderr combined) to end,
 * killing the command's processes through `killTree` at the deadline.
 */
export function superviseCommand(
  child: ExecChild,
  options: { timeoutMs: number; maxOutputBytes: number; onOutput?: (chunk: Buffer) => void; input?: Buffer; killTree: () => Promise<void> },
): Promise<RunOutcome> {
  return new Promise((resolve, reject) => {
    const output = new HeadTailBuffer(options.maxOutputBytes);
    let capturing = true;
    let timedOut = false;
    let ended = false;
    child.stdin.on('error', () => {}); // the command may end before reading all of its input
    child.stdin.end(options.input);
    let onChunk: (() => void) | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      if (!capturing) return;
      output.push(chunk);
      options.onOutput?.(chunk);
      onChunk?.();
    });
    child.stdout.on('end', () => (ended = true));
    child.stderr.resume();
    /** The kill at the deadline: the result waits for it, so that no process of the command outlives it. */
    let killing: Promise<unknown> | undefined;
    const onDeadline = () => {
      timedOut = true;
      const hardKill = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
      hardKill.unref();
      killing = options
        .killTree()
        .catch(() => child.kill('SIGKILL'))
        .finally(() => child.once('exit', () => clearTimeout(hardKill)));
    };
    const deadline = options.timeoutMs > 0 ? setTimeout(onDeadline, Math.min(options.timeoutMs, MAX_TIMER_MS)) : undefined;
    child.on('error', (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(deadline);
      let finished = false;
      let quiet: NodeJS.Timeout | undefined;
      let longest: NodeJS.Timeout | undefined;
      const finish = () => {
        if (finished) return;
        finished = true;
        capturing = false;
        onChunk = undefined;
        clearTimeout(quiet);
        clearTimeout(longest);
        // Reading on (and dropping) what background processes print keeps them from
        // dying of SIGPIPE once the result is out.
        const result = {
          output: output.text(),
          outputBytes: output.total,
          outputTruncated: output.truncated,
          exitCode: timedOut ? TIMEOUT_EXIT_CODE : (code ?? 128 + signalNumber(signal)),
          timedOut,
          lingering: ended ? null : child.stdout,
        };
        void Promise.resolve(killing).then(() => resolve(result));
      };
      if (ended) return finish();
      quiet = setTimeout(finish, OUTPUT_QUIET_MS);
      longest = setTimeout(finish, OUTPUT_DRAIN_MAX_MS);
      onChunk = () => {
        clearTimeout(quiet);
        quiet = setTimeout(finish, OUTPUT_QUIET_MS);
      };
      child.stdout.once('end', finish);
    });
  });
}

/** Per instance: output pipes still held by background processes of finished commands. */
export class LingeringPipes {
  private readonly byInstance = new Map<string, Set<Readable>>();

  /** Reads on from a pipe that background processes hold, so their writes do not fail, until they end. */
  keepDraining(instanceId: string, pipe: Readable): void {
    let pipes = this.byInstance.get(instanceId);
    if (!pipes) this.byInstance.set(instanceId, (pipes = new Set()));
    const set = pipes;
    pipe.on('close', () => set.delete(pipe));
    pipe.resume();
    set.add(pipe);
    if (set.size > MAX_LINGERING_PIPES) {
      const oldest = set.values().next().value;
      oldest?.destroy();
      if (oldest) set.delete(oldest);
    }
  }

  /** Closes the instance's pipes, when it is torn down. */
  closeAll(instanceId: string): void {
    for (const pipe of this.byInstance.get(instanceId) ?? []) pipe.destroy();
    this.byInstance.delete(instanceId);
  }
}

function signalNumber(signal: NodeJS.Signals | null): number {
  const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };
  return (signal && numbers[signal]) ?? 0;
}

/** Quotes a string for a POSIX shell. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
