// The processes service of E2B's in-sandbox protocol (process.Process), over core: a
// process is a command of the instance (core's commands), started in the background so
// its output streams as it comes; a process with a pseudo-terminal is a terminal of the
// instance (core's terminals). E2B's pid stands for the command's or terminal's id: the
// pids are the adapter's, numbered per instance as processes start, since roomkit names
// commands by id and the SDK only needs a number to name the process by again.
// Reconnecting (Connect) replays the output kept (core's for a command, terminal-output.ts's
// for a terminal), then follows it; that holds for processes this server started, while
// they run (reattaching after a restart waits for the agent's attach).
import { Code, ConnectError, createContextKey, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { CommandSession } from '../../core/commands.ts';
import type { InstanceRef } from '../../core/instance-address.ts';
import type { OutputPiece } from '../../core/output-log.ts';
import type { Terminal } from '../../core/terminals.ts';
import type { Services } from '../../services.ts';
import { connectErrorOf } from './errors.ts';
import { TerminalOutput } from './terminal-output.ts';
import { type Process, type ProcessConfig, type ProcessSelector, type ProcessEventSchema, Signal } from './generated/process/process_pb.js';

/** The sandbox (and caller) an in-sandbox call is for, set by the route before the service runs. */
export interface SandboxCall {
  address: InstanceRef;
  keyId: string;
  /** The user the SDK asked to run as (its Authorization header), if any. */
  user: string | undefined;
}

export const SANDBOX_CALL = createContextKey<SandboxCall | undefined>(undefined);

/** The response header that names the command a started process is on roomkit's API. */
export const COMMAND_ID_HEADER = 'Roomkit-Command-Id';
/** How often a stream with nothing to say tells the client it is alive. */
const KEEPALIVE_MS = 50_000;
/** Most output read from the log in one go when catching up. */
const CATCH_UP_BYTES = 256 * 1024;
/** The user E2B's SDK means when it names none: the instance's own. */
const DEFAULT_USER = 'user';
/** The first pid of an instance's processes: clear of the guest's own low pids. */
const FIRST_PID = 1000;

type NewEntry = { tag: string | undefined; config: ProcessConfig } & (
  | { kind: 'command'; session: CommandSession }
  | { kind: 'pty'; terminal: Terminal; output: TerminalOutput }
);
type ProcessEntry = NewEntry & { pid: number };

/** The processes started through E2B in each instance, by pid, while they run. */
class ProcessTable {
  private readonly byInstance = new Map<string, { next: number; entries: Map<number, ProcessEntry> }>();

  add<E extends NewEntry>(instanceId: string, entry: E): E & { pid: number } {
    let table = this.byInstance.get(instanceId);
    if (!table) this.byInstance.set(instanceId, (table = { next: FIRST_PID, entries: new Map() }));
    const added = { ...entry, pid: table.next++ };
    table.entries.set(added.pid, added);
    const ended: Promise<unknown> = entry.kind === 'command' ? entry.session.done : entry.terminal.ended;
    void ended.then(() => {
      table.entries.delete(added.pid);
      if (table.entries.size === 0 && this.byInstance.get(instanceId) === table) this.byInstance.delete(instanceId);
    });
    return added;
  }

  running(instanceId: string): ProcessEntry[] {
    return [...(this.byInstance.get(instanceId)?.entries.values() ?? [])];
  }

  find(instanceId: string, selector: ProcessSelector | undefined): ProcessEntry {
    const entries = this.running(instanceId);
    const found =
      selector?.selector.case === 'pid'
        ? entries.find((e) => e.pid === selector.selector.value)
        : selector?.selector.case === 'tag'
          ? entries.find((e) => e.tag === selector.selector.value)
          : undefined;
    if (!found) throw new ConnectError(`no running process ${selector?.selector.value ?? ''} in this sandbox`, Code.NotFound);
    return found;
  }
}

/** A shell word that stays one word whatever it holds. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/**
 * A process's program and arguments, through the image's `sudo` for a user other than
 * the instance's own (E2B's `root`). A command runs them directly, as E2B does (no shell
 * in between: a process fewer to start); a terminal runs them from its shell line.
 */
function programOf(config: ProcessConfig, user: string | undefined, ownUser: string): string[] {
  const words = [config.cmd, ...config.args];
  if (user === undefined || user === ownUser || user === DEFAULT_USER) return words;
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) throw new ConnectError(`${user} is not a user name`, Code.InvalidArgument);
  return user === 'root' ? ['sudo', '-E', '--', ...words] : ['sudo', '-E', '-u', user, '--', ...words];
}

/** Words as one shell line, each quoted as needed: a terminal's line, and a command's text on roomkit's API. */
function shellLine(words: string[]): string {
  return words.map(shellWord).join(' ');
}

function callOf(context: HandlerContext): SandboxCall {
  const call = context.values.get(SANDBOX_CALL);
  if (!call) throw new ConnectError('no sandbox named', Code.Internal);
  return call;
}

type EventInit = MessageInitShape<typeof ProcessEventSchema>;

export function processService(services: Services): Partial<ServiceImpl<typeof Process>> {
  const table = new ProcessTable();

  return {
    async *start(request, context) {
      const call = callOf(context);
      const config = request.process;
      if (!config || config.cmd === '') throw new ConnectError('process.cmd names the program to run', Code.InvalidArgument);
      // The instance's own user is looked up only when another is named: most calls name none.
      let ownUser = DEFAULT_USER;
      if (call.user !== undefined && call.user !== DEFAULT_USER) {
        try {
          ownUser = (await services.instances.requireReadyAt(call.address)).spec.user;
        } catch (err) {
          throw connectErrorOf(err);
        }
      }
      const program = programOf(config, call.user, ownUser);
      const line = shellLine(program);
      if (request.pty) {
        const entry = await openTerminal(services, table, call, request.tag, config, line, request.pty.size);
        yield { event: { event: { case: 'start', value: { pid: entry.pid } } } };
        for await (const event of followTerminal(entry.output, 0, context.signal)) yield { event };
        return;
      }
      let session: CommandSession;
      try {
        session = await services.commands.startAt(call.address, {
          command: line,
          argv: program,
          background: true,
          ...(request.stdin === true ? { stdin_open: true } : {}),
          ...(config.cwd === undefined || config.cwd === '' ? {} : { cwd: config.cwd }),
          ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
        });
      } catch (err) {
        throw connectErrorOf(err);
      }
      const entry = table.add(call.address.instanceId, { kind: 'command', tag: request.tag, config, session });
      // roomkit's own view of the command (its files_changed, its undo) is one request away:
      // GET /api/profile/{templateID}/room/{its room}/commands/{this id} (the REST API).
      context.responseHeader.set(COMMAND_ID_HEADER, session.id);
      yield { event: { event: { case: 'start', value: { pid: entry.pid } } } };
      for await (const event of followOutput(session, context.signal)) yield { event };
    },

    async *connect(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      yield { event: { event: { case: 'start', value: { pid: entry.pid } } } };
      if (entry.kind === 'pty') {
        for await (const event of followTerminal(entry.output, entry.output.oldest, context.signal)) yield { event };
        return;
      }
      context.responseHeader.set(COMMAND_ID_HEADER, entry.session.id);
      for await (const event of followOutput(entry.session, context.signal)) yield { event };
    },

    async update(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      const size = request.pty?.size;
      if (entry.kind !== 'pty') throw new ConnectError('only a process with a pseudo-terminal can be resized', Code.FailedPrecondition);
      if (size) guard(() => entry.terminal.resize(size.cols, size.rows));
      return {};
    },

    async list(_request, context) {
      const call = callOf(context);
      return {
        processes: table.running(call.address.instanceId).map((e) => ({ pid: e.pid, config: e.config, ...(e.tag === undefined ? {} : { tag: e.tag }) })),
      };
    },

    async sendInput(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      const input = request.input?.input;
      if (entry.kind === 'pty') {
        if (input?.case !== 'pty') throw new ConnectError('a pseudo-terminal takes its input as pty', Code.InvalidArgument);
        entry.terminal.write(Buffer.from(input.value));
        return {};
      }
      if (input?.case !== 'stdin') throw new ConnectError('a process without a pseudo-terminal takes its input as stdin', Code.InvalidArgument);
      await writeStdin(services, call, entry.session.id, { data: Buffer.from(input.value).toString('base64'), encoding: 'base64' });
      return {};
    },

    async closeStdin(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      if (entry.kind !== 'command') throw new ConnectError('a pseudo-terminal has no stdin to close', Code.FailedPrecondition);
      await writeStdin(services, call, entry.session.id, { close: true });
      return {};
    },

    async sendSignal(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      if (entry.kind === 'pty') {
        entry.terminal.close('closed', 'the process was sent a signal');
        return {};
      }
      try {
        await services.commands.killAt(call.address, entry.session.id, request.signal === Signal.SIGTERM ? 'TERM' : 'KILL');
      } catch (err) {
        throw connectErrorOf(err);
      }
      return {};
    },
  };
}

async function writeStdin(services: Services, call: SandboxCall, commandId: string, input: { data?: string; encoding?: 'base64'; close?: boolean }): Promise<void> {
  try {
    await services.commands.writeStdinAt(call.address, commandId, input);
  } catch (err) {
    throw connectErrorOf(err);
  }
}

function guard(fn: () => void): void {
  try {
    fn();
  } catch (err) {
    throw connectErrorOf(err);
  }
}

/**
 * A process with a pseudo-terminal: a terminal of the instance running its line (after
 * its working directory and environment). The terminal outlives the stream that opened
 * it, as E2B's PTYs do, until it exits, is killed, or core ends it (idle, the instance stopping).
 */
async function openTerminal(
  services: Services,
  table: ProcessTable,
  call: SandboxCall,
  tag: string | undefined,
  config: ProcessConfig,
  line: string,
  size: { cols: number; rows: number } | undefined,
): Promise<ProcessEntry & { kind: 'pty' }> {
  const exports = Object.entries(config.envs).map(([name, value]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ConnectError(`${name} is not an environment variable name`, Code.InvalidArgument);
    return `export ${name}=${shellWord(value)}; `;
  });
  const cwd = config.cwd === undefined || config.cwd === '' ? '' : `cd ${shellWord(config.cwd)} && `;
  let terminal: Terminal;
  try {
    terminal = await services.terminals.openAt(call.address, {
      command: `${exports.join('')}${cwd}exec ${line}`,
      ...(size ? { cols: size.cols, rows: size.rows } : {}),
    });
  } catch (err) {
    throw connectErrorOf(err);
  }
  return table.add(call.address.instanceId, { kind: 'pty' as const, tag, config, terminal, output: new TerminalOutput(terminal) });
}

/** A terminal's output from `offset` on as E2B's pty data events, then its end; a keepalive while it is quiet. */
export async function* followTerminal(output: TerminalOutput, offset: number, signal: AbortSignal): AsyncGenerator<EventInit> {
  let sent = offset;
  for (;;) {
    // Whether it had ended is read before its output: output that came while the chunks
    // were being yielded is sent in the next round, never lost to a break.
    const ended = output.end !== undefined;
    const { chunks, next } = output.since(sent);
    for (const chunk of chunks) yield { event: { case: 'data', value: { output: { case: 'pty', value: chunk } } } };
    sent = next;
    if (ended || signal.aborted) break;
    if (await output.wait(sent, KEEPALIVE_MS, signal)) yield { event: { case: 'keepalive', value: {} } };
  }
  const end = output.end;
  if (!end || signal.aborted) return;
  const exitCode = end.kind === 'exit' ? end.exitCode : -1;
  const status = end.kind === 'exit' ? `exit status ${exitCode}` : end.message;
  yield { event: { case: 'end', value: { exitCode, exited: end.kind === 'exit', status, ...(end.kind === 'exit' ? {} : { error: status }) } } };
}

/**
 * A command's output as E2B's data events, from its first byte (kept output first, then
 * each piece as it comes), then its end; a keepalive while it is quiet.
 */
async function* followOutput(session: CommandSession, signal: AbortSignal): AsyncGenerator<EventInit> {
  let sent = 0;
  const queue: OutputPiece[] = [];
  let wake: (() => void) | undefined;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const unsubscribe = session.output.subscribe((piece) => {
    queue.push(piece);
    notify();
  });
  let ended = false;
  void session.done.then(() => {
    ended = true;
    notify();
  });
  signal.addEventListener('abort', notify, { once: true });
  try {
    for (;;) {
      // Whatever the log holds past what was sent, in order; the queue only wakes us.
      queue.length = 0;
      for (let pieces = session.output.readPieces(sent, CATCH_UP_BYTES); pieces.length > 0; pieces = session.output.readPieces(sent, CATCH_UP_BYTES)) {
        for (const piece of pieces) {
          const data = Buffer.from(piece.data, 'utf8');
          yield { event: { case: 'data', value: { output: piece.stream === 'stderr' ? { case: 'stderr', value: data } : { case: 'stdout', value: data } } } };
          sent = piece.end;
        }
      }
      if (signal.aborted) return;
      if (ended) break;
      const quiet = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), KEEPALIVE_MS);
        wake = () => {
          clearTimeout(timer);
          resolve(false);
        };
        if (queue.length > 0 || ended || signal.aborted) wake();
      });
      if (quiet) yield { event: { case: 'keepalive', value: {} } };
    }
  } finally {
    unsubscribe();
  }
  if (session.error) throw connectErrorOf(session.error);
  const result = session.result?.result;
  const exitCode = result?.exit_code ?? -1;
  const status = session.state === 'killed' ? 'signal: killed' : session.state === 'timed_out' ? 'timed out' : `exit status ${exitCode}`;
  yield {
    event: {
      case: 'end',
      value: { exitCode, exited: session.state === 'exited', status, ...(exitCode !== 0 && session.state !== 'exited' ? { error: status } : {}) },
    },
  };
}
