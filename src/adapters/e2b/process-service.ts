// The processes service of E2B's in-sandbox protocol (process.Process), over core's
// commands: a process is a command of the instance, started in the background so its
// output streams as it comes, with E2B's pid standing for the command's id. The pids
// are the adapter's (numbered per instance as processes start): roomkit's commands are
// named by id, and the SDK only needs a number it can name the process by again.
// Reattaching to a running process (Connect) and pseudo-terminals wait for the agent's
// attach operation and a PTY over core's commands; they answer "unimplemented".
import { Code, ConnectError, createContextKey, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { CommandSession } from '../../core/commands.ts';
import type { InstanceRef } from '../../core/instance-address.ts';
import type { OutputPiece } from '../../core/output-log.ts';
import type { Services } from '../../services.ts';
import { connectErrorOf, unimplemented } from './errors.ts';
import { type Process, type ProcessConfig, type ProcessSelector, type StartResponseSchema, Signal } from './generated/process/process_pb.js';

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
/** The first pid of an instance's processes: clear of the guest's own low pids. */
const FIRST_PID = 1000;

interface ProcessEntry {
  pid: number;
  commandId: string;
  tag: string | undefined;
  config: ProcessConfig;
  session: CommandSession;
}

/** The processes started through E2B in each instance, by pid, while they run. */
class ProcessTable {
  private readonly byInstance = new Map<string, { next: number; entries: Map<number, ProcessEntry> }>();

  add(instanceId: string, entry: Omit<ProcessEntry, 'pid'>): ProcessEntry {
    let table = this.byInstance.get(instanceId);
    if (!table) this.byInstance.set(instanceId, (table = { next: FIRST_PID, entries: new Map() }));
    const added = { ...entry, pid: table.next++ };
    table.entries.set(added.pid, added);
    void entry.session.done.then(() => {
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

function callOf(context: HandlerContext): SandboxCall {
  const call = context.values.get(SANDBOX_CALL);
  if (!call) throw new ConnectError('no sandbox named', Code.Internal);
  return call;
}

type StartEvent = MessageInitShape<typeof StartResponseSchema>;

export function processService(services: Services): Partial<ServiceImpl<typeof Process>> {
  const table = new ProcessTable();

  return {
    async *start(request, context) {
      const call = callOf(context);
      if (request.pty) throw unimplemented('A pseudo-terminal (pty.create)');
      if (call.user !== undefined && call.user !== 'user') throw unimplemented(`Running as "${call.user}"`);
      const config = request.process;
      if (!config || config.cmd === '') throw new ConnectError('process.cmd names the program to run', Code.InvalidArgument);
      let session: CommandSession;
      try {
        session = await services.commands.startAt(call.address, {
          // The program and its arguments as one shell line, each word quoted as needed.
          command: [config.cmd, ...config.args].map(shellWord).join(' '),
          background: true,
          ...(request.stdin === true ? { stdin_open: true } : {}),
          ...(config.cwd === undefined || config.cwd === '' ? {} : { cwd: config.cwd }),
          ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
        });
      } catch (err) {
        throw connectErrorOf(err);
      }
      const entry = table.add(call.address.instanceId, { commandId: session.id, tag: request.tag, config, session });
      // roomkit's own view of the command (its files_changed, its undo) is one request away:
      // GET /api/profile/{templateID}/room/{its room}/commands/{this id} (the REST API).
      context.responseHeader.set(COMMAND_ID_HEADER, session.id);
      yield { event: { event: { case: 'start', value: { pid: entry.pid } } } } satisfies StartEvent;
      yield* followOutput(session, context.signal);
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
      if (input?.case !== 'stdin') throw unimplemented('Input to a pseudo-terminal');
      await writeStdin(services, call, entry, { data: Buffer.from(input.value).toString('base64'), encoding: 'base64' });
      return {};
    },

    async closeStdin(request, context) {
      const call = callOf(context);
      await writeStdin(services, call, table.find(call.address.instanceId, request.process), { close: true });
      return {};
    },

    async sendSignal(request, context) {
      const call = callOf(context);
      const entry = table.find(call.address.instanceId, request.process);
      try {
        await services.commands.killAt(call.address, entry.commandId, request.signal === Signal.SIGTERM ? 'TERM' : 'KILL');
      } catch (err) {
        throw connectErrorOf(err);
      }
      return {};
    },
  };
}

async function writeStdin(services: Services, call: SandboxCall, entry: ProcessEntry, input: { data?: string; encoding?: 'base64'; close?: boolean }): Promise<void> {
  try {
    await services.commands.writeStdinAt(call.address, entry.commandId, input);
  } catch (err) {
    throw connectErrorOf(err);
  }
}

/**
 * A command's output as E2B's data events, from its first byte (kept output first, then
 * each piece as it comes), then its end; a keepalive while it is quiet.
 */
async function* followOutput(session: CommandSession, signal: AbortSignal): AsyncGenerator<StartEvent> {
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
          yield { event: { event: { case: 'data', value: { output: piece.stream === 'stderr' ? { case: 'stderr', value: data } : { case: 'stdout', value: data } } } } };
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
      if (quiet) yield { event: { event: { case: 'keepalive', value: {} } } };
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
      event: {
        case: 'end',
        value: { exitCode, exited: session.state === 'exited', status, ...(exitCode !== 0 && session.state !== 'exited' ? { error: status } : {}) },
      },
    },
  };
}
