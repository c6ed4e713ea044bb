// Programs and commands run through the instance's agent (images/guest/agent/process.go):
// as the VM user in its home or as root, with stdout and stderr apart, stdin, and the
// time limit kept by the agent inside the instance; the kill of a command's processes;
// and attaching again to a command whose connection dropped (attach.go in the agent
// keeps its output and end for that), from the output offset the host had.
import type { RunResult } from '../../host/run.ts';
import { HeadTailBuffer } from '../../host/output.ts';
import { VM_UID } from '../../images/builder.ts';
import { type AgentChannel, type AgentEndpoint, agentCall, agentRequest, parseJson } from './client.ts';
import { FRAME } from './frames.ts';
import { AGENT_PROTOCOL } from './protocol.ts';

/** The PATH of every program started through the agent (and of the instance's first process). */
export const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The environment variable that marks every process of a command (inherited by its children), for killing its tree. */
export const COMMAND_MARKER = AGENT_PROTOCOL.constants.commandMarker;
/** Exit code reported for a command killed at its deadline (as timeout(1) does). */
export const TIMEOUT_EXIT_CODE = 124;

export interface ExecIdentity {
  /** `vm`: the profile's unprivileged user in its home; `root`: root in /. */
  as: 'vm' | 'root';
  home?: string;
}

export interface ExecOptions extends ExecIdentity {
  env?: string[];
  timeoutMs: number;
}

/** The agent's exec parameters for a program run as `identity` with `env` (NAME=value) besides PATH and HOME. */
export function agentIdentity(identity: ExecIdentity, env: string[] = []): { uid: number; gid: number; dir: string; env: string[] } {
  const vm = identity.as === 'vm';
  const home = vm ? (identity.home ?? '/') : '/root';
  return { uid: vm ? VM_UID : 0, gid: vm ? VM_UID : 0, dir: vm ? (identity.home ?? '/') : '/', env: [PATH_ENV, `HOME=${home}`, ...env] };
}

/** The connection ended while the command ran (its instance stopped, or the agent died): what had come of its output. */
export class AgentConnectionLost extends Error {
  readonly partial: KeptOutput;
  constructor(message: string, partial: AgentConnectionLost['partial']) {
    super(message);
    this.name = 'AgentConnectionLost';
    this.partial = partial;
  }
}

/** After this long past its own time limit, the agent's answer is not waited for. */
const ANSWER_GRACE_MS = 10_000;

export interface AgentCommandOptions {
  argv: string[];
  identity: ExecIdentity;
  env: string[];
  /** Marks the command's processes (COMMAND_MARKER), for killing its tree. */
  commandId?: string;
  /** 0 for none. */
  timeoutMs: number;
  /** How long it may print nothing before the agent ends it (its end says no_output); 0 or absent for none. */
  idleOutputMs?: number;
  maxOutputBytes: number;
  /** Given all at once, then closed; without it (or stdinOpen) the command's stdin is /dev/null. */
  input?: Buffer;
  /** Keep stdin open: more input comes through the channel given to onStarted. */
  stdinOpen?: boolean;
  onOutput?: (chunk: Buffer, stream: 'stdout' | 'stderr') => void;
  /** Called once the command runs, with its connection (with stdinOpen: once the input given at once was sent, to send more on). */
  onStarted?: (channel: AgentChannel) => void;
  /**
   * When the connection drops before the command's end: a new connection attached to
   * the command from the output offset the host has (attachAgentCommand), or null when
   * the command cannot be reached again (then the loss is AgentConnectionLost).
   */
  reattach?: (offset: number) => Promise<AgentChannel | null>;
  /** Called with each connection attached again (input goes on through it). */
  onReattached?: (channel: AgentChannel) => void;
}

/** What the agent answers an attach: where the replay starts and how much was no longer kept. */
export interface Attached {
  channel: AgentChannel;
  pid: number;
  offset: number;
  /** Output bytes before `offset` the agent no longer kept (its bound is keptOutputBytes per command). */
  dropped: number;
  outputBytes: number;
  running: boolean;
}

/**
 * Attaches to a command the agent runs or ran lately (by command id, or by pid when the
 * id is empty): its output from `offset` comes first, then live output and its end.
 * Throws AgentFailure `not_found` when the agent keeps no such command.
 */
export async function attachAgentCommand(endpoint: AgentEndpoint, target: { commandId?: string; pid?: number; offset: number }): Promise<Attached> {
  const { channel, reply } = await agentRequest(endpoint, { op: 'attach', command_id: target.commandId ?? '', pid: target.pid ?? 0, offset: target.offset });
  return {
    channel,
    pid: Number(reply.pid ?? 0),
    offset: Number(reply.offset ?? target.offset),
    dropped: Number(reply.dropped ?? 0),
    outputBytes: Number(reply.output_bytes ?? 0),
    running: reply.running === true,
  };
}

export type AgentCommandOutcome = KeptOutput & { exitCode: number; signal: string | null; timedOut: boolean; noOutput: boolean };

/** What is kept of a command's output: each stream within maxOutputBytes. */
export interface KeptOutput {
  /** stdout and stderr in the order they arrived, lossy UTF-8, kept within maxOutputBytes. */
  output: string;
  outputBytes: number;
  outputTruncated: boolean;
  stdout: string;
  stdoutBytes: number;
  stdoutTruncated: boolean;
  stderr: string;
  stderrBytes: number;
  stderrTruncated: boolean;
}

/**
 * Runs a command through the agent and waits for its end. Throws AgentUnavailable when
 * the agent could not be asked (nothing ran), AgentFailure when it could not start it.
 */
export async function runAgentCommand(endpoint: AgentEndpoint, options: AgentCommandOptions): Promise<AgentCommandOutcome> {
  const { channel } = await agentRequest(endpoint, {
    op: 'exec',
    argv: options.argv,
    ...agentIdentity(options.identity, options.env),
    command_id: options.commandId ?? '',
    timeout_ms: options.timeoutMs,
    ...(options.idleOutputMs ? { idle_output_ms: options.idleOutputMs } : {}),
    stdin: options.input !== undefined || options.stdinOpen === true,
  });
  // Input kept open goes on after what was given at once: the channel is handed over only then.
  if (!options.stdinOpen) options.onStarted?.(channel);
  if (options.input !== undefined) {
    for (let at = 0; at < options.input.length; at += 1 << 20) {
      channel.send(FRAME.input, options.input.subarray(at, at + (1 << 20)));
      await channel.drained();
    }
    if (!options.stdinOpen) channel.send(FRAME.close);
  }
  if (options.stdinOpen) options.onStarted?.(channel);
  const output = new HeadTailBuffer(options.maxOutputBytes);
  const stdout = new HeadTailBuffer(options.maxOutputBytes);
  const stderr = new HeadTailBuffer(options.maxOutputBytes);
  const kept = (): KeptOutput => ({
    output: output.text(),
    outputBytes: output.total,
    outputTruncated: output.truncated,
    stdout: stdout.text(),
    stdoutBytes: stdout.total,
    stdoutTruncated: stdout.truncated,
    stderr: stderr.text(),
    stderrBytes: stderr.total,
    stderrTruncated: stderr.truncated,
  });
  let current = channel;
  // The time limit is the agent's; this only bounds the wait for its answer while connected.
  const guarded = () =>
    options.timeoutMs > 0 ? setTimeout(() => current.close(), Math.min(options.timeoutMs + ANSWER_GRACE_MS, 2 ** 31 - 1)) : undefined;
  let guard = guarded();
  try {
    for (;;) {
      const frame = await current.next();
      if (frame === null && options.reattach) {
        clearTimeout(guard);
        const again = await options.reattach(output.total);
        if (again) {
          current = again;
          guard = guarded();
          options.onReattached?.(again);
          continue;
        }
      }
      if (frame === null) {
        throw new AgentConnectionLost(
          `the instance's agent stopped answering while the command ran${current.error ? `: ${current.error.message}` : ''}`,
          kept(),
        );
      }
      if (frame.type === FRAME.stdout || frame.type === FRAME.stderr) {
        const stream = frame.type === FRAME.stdout ? 'stdout' : 'stderr';
        output.push(frame.payload);
        (stream === 'stdout' ? stdout : stderr).push(frame.payload);
        options.onOutput?.(frame.payload, stream);
      } else if (frame.type === FRAME.end) {
        const end = parseJson(frame.payload);
        return {
          ...kept(),
          // As timeout(1) does.
          exitCode: end.timed_out === true ? TIMEOUT_EXIT_CODE : Number(end.exit_code ?? -1),
          signal: typeof end.signal === 'string' ? end.signal : null,
          timedOut: end.timed_out === true,
          noOutput: end.no_output === true,
        };
      }
    }
  } finally {
    clearTimeout(guard);
    current.close();
  }
}

/** A program run through the agent, answered like host/run.ts's run() (stdout and stderr as text). */
export async function agentRun(
  endpoint: AgentEndpoint,
  argv: string[],
  options: { identity: ExecIdentity; env?: string[]; timeoutMs: number; input?: Buffer },
): Promise<RunResult> {
  let outcome: AgentCommandOutcome;
  try {
    outcome = await runAgentCommand(endpoint, {
      argv,
      identity: options.identity,
      env: options.env ?? [],
      timeoutMs: options.timeoutMs,
      maxOutputBytes: 1024 * 1024,
      ...(options.input !== undefined ? { input: options.input } : {}),
    });
  } catch (err) {
    // A program whose instance stops under it failed, with what it printed: not a throw.
    if (!(err instanceof AgentConnectionLost)) throw err;
    const { stdout, stderr } = err.partial;
    return { code: null, signal: null, stdout, stderr: `${stderr}${stderr === '' || stderr.endsWith('\n') ? '' : '\n'}${err.message}\n`, timedOut: false };
  }
  // A program killed by signal n exits 128+n (the agent's end frame says so).
  return {
    code: outcome.timedOut ? null : outcome.exitCode,
    signal: outcome.timedOut ? 'SIGKILL' : null,
    stdout: outcome.stdout,
    stderr: outcome.stderr,
    timedOut: outcome.timedOut,
  };
}

/** Signals every process of a command (marked with COMMAND_MARKER, and their sessions) as root; how many it signalled. */
export async function killCommand(endpoint: AgentEndpoint, commandId: string, signal: string): Promise<number> {
  const reply = await agentCall(endpoint, { op: 'kill', command_id: commandId, signal });
  return Number(reply.signalled ?? 0);
}
