// Terminals through the instance's agent: a login shell (or a command) on a
// pseudo-terminal in the guest, as the VM user, with input, resizes and output passed
// through one agent connection for as long as the terminal lives. A terminal let go
// without a hang-up (its instance paused with its memory) keeps its shell in the guest,
// and attaching to it again replays the output the agent kept, so a screen can be drawn
// again. A terminal whose connection drops while it is held (a snapshot with memory of
// its running instance drops every connection) is attached again by the host from the
// output it had, when the runtime says so (`reattach`): its client sees no break.
import { type AgentChannel, type AgentEndpoint, agentRequest, parseJson } from './client.ts';
import { FRAME, type FrameType } from './frames.ts';
import type { TerminalRequest, TerminalSession } from '../types.ts';
import { agentIdentity, attachAgentCommand, COMMAND_MARKER } from './commands.ts';

/** The shell a terminal starts when no command is given: bash when the image has it. */
const LOGIN_SHELL = 'if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi';

/**
 * Asked when a held terminal's connection drops: a new connection to its shell from
 * `offset` (the output bytes received), or null when the drop is its end.
 */
export type TerminalReattach = (offset: number) => Promise<AgentChannel | null>;

export async function openAgentTerminal(endpoint: AgentEndpoint, request: TerminalRequest, reattach?: TerminalReattach): Promise<TerminalSession> {
  const user = request.user;
  const env = {
    TERM: 'xterm-256color',
    LANG: 'C.UTF-8',
    USER: user,
    LOGNAME: user,
    SHELL: '/bin/bash',
    ...request.env,
    [COMMAND_MARKER]: request.terminalId,
  };
  const { channel } = await agentRequest(endpoint, {
    op: 'exec',
    argv: ['/bin/sh', '-c', request.command ?? LOGIN_SHELL],
    ...agentIdentity({ as: 'vm', home: request.home }, Object.entries(env).map(([k, v]) => `${k}=${v}`)),
    command_id: request.terminalId,
    timeout_ms: 0,
    stdin: true,
    pty: { cols: request.cols, rows: request.rows },
  });
  return sessionOver(channel, reattach);
}

/** Attaches again to a terminal's shell the agent still runs (or ran lately), from the output it kept. */
export async function attachAgentTerminal(endpoint: AgentEndpoint, terminalId: string, reattach?: TerminalReattach): Promise<TerminalSession> {
  const { channel, offset } = await attachAgentCommand(endpoint, { commandId: terminalId, offset: 0 });
  return sessionOver(channel, reattach, offset);
}

function sessionOver(first: AgentChannel, reattach?: TerminalReattach, startOffset = 0): TerminalSession {
  const early: Buffer[] = [];
  const listeners: ((chunk: Buffer) => void)[] = [];
  let channel = first;
  let received = startOffset;
  /** Let go or hung up by the host: a drop is then its end, never attached again. */
  let released = false;
  /** Input and resizes sent after the connection dropped, passed on once it is attached again. */
  let held: [FrameType, Buffer | object][] | undefined;
  const send = (type: FrameType, payload: Buffer | object) => {
    if (held) held.push([type, payload]);
    else if (!channel.send(type, payload) && reattach && !released) held = [[type, payload]];
  };
  const exited = (async () => {
    for (;;) {
      const frame = await channel.next();
      if (frame === null) {
        const again = released || !reattach ? null : await reattach(received);
        if (!again) {
          held = undefined;
          return { exitCode: -1 };
        }
        channel = again;
        for (const [type, payload] of held ?? []) channel.send(type, payload);
        held = undefined;
        continue;
      }
      if (frame.type === FRAME.stdout || frame.type === FRAME.stderr) {
        received += frame.payload.length;
        if (listeners.length === 0) early.push(frame.payload);
        for (const listener of listeners) listener(frame.payload);
      } else if (frame.type === FRAME.end) {
        channel.close();
        return { exitCode: Number(parseJson(frame.payload).exit_code ?? -1) };
      }
    }
  })();
  return {
    onOutput(listener) {
      listeners.push(listener);
      for (const chunk of early.splice(0)) listener(chunk);
    },
    write(data) {
      send(FRAME.input, data);
    },
    resize(cols, rows) {
      send(FRAME.resize, { cols, rows });
    },
    pause() {
      channel.pause();
    },
    resume() {
      channel.resume();
    },
    detach() {
      // No hang-up: the agent keeps the shell and its output for a later attach.
      released = true;
      channel.close();
    },
    close() {
      // Hang up: the shell and what it started end; the connection closes after its end frame.
      released = true;
      channel.send(FRAME.signal, { signal: 'HUP' });
      setTimeout(() => {
        channel.send(FRAME.signal, { signal: 'KILL' });
        setTimeout(() => channel.close(), 2_000).unref();
      }, 2_000).unref();
    },
    exited,
  };
}
