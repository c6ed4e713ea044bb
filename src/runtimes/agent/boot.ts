// Bringing an instance's guest up, for any runtime whose instances run roomkit's agent:
// the files it needs written into its root before any of its code runs (its
// configuration, the agent's key), then, once the runtime has started the machine,
// waiting for its first process, the agent, to answer (its init has started the root
// service by then) and checking that the VM user can work in its home: in the agent's
// hello, or, with an agent too old to check it there, by a command run as that user.
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import type { RunResult } from '../../host/run.ts';
import { type AgentEndpoint, agentCall, AgentFailure, AgentUnavailable } from './client.ts';
import { AGENT_PROTOCOL } from './protocol.ts';
import { VM_UID } from '../../images/builder.ts';
import { GUEST_AGENT } from '../../images/guest-additions.ts';
import type { MachineSpec } from '../types.ts';
import type { ExecOptions } from './commands.ts';

export const BOOT_TIMEOUT_MS = 15_000;
/** How often a booting agent's port is tried while nothing listens on it yet. */
const BOOT_POLL_MS = 4;
/** Each poll of a boot waits this much longer than the one before (4 ms reaches 50 ms after ~300 ms), up to BOOT_POLL_MAX_MS. */
const BOOT_POLL_GROWTH = 1.15;
const BOOT_POLL_MAX_MS = 50;
/**
 * How long one try of a booting agent's port waits for the connection before a new one
 * is tried: a SYN dropped while the sandbox's network stack takes over the interface
 * would otherwise wait for the kernel's second SYN, a second later. Doubled after each
 * try that times out, up to the last, so that a host too busy to connect quickly still
 * gets there.
 */
const BOOT_CONNECT_TRIES_MS = [50, 100, 200, 400, 1_000];

/** Runs a program in the instance being booted. */
export type Exec = (argv: string[], options: ExecOptions) => Promise<RunResult>;

/**
 * Name resolution (the host's DNS servers, or none without egress), host name, hosts
 * and a world-writable /tmp. No guest code has run yet, so writing into its root from
 * the host is safe.
 */
export function writeGuestConfig(rootfs: string, nameservers: string[]): void {
  writeFileSync(join(rootfs, 'etc', 'resolv.conf'), nameservers.map((ns) => `nameserver ${ns}\n`).join(''));
  writeFileSync(join(rootfs, 'etc', 'hostname'), 'roomkit\n');
  writeFileSync(join(rootfs, 'etc', 'hosts'), '127.0.0.1\tlocalhost roomkit\n::1\tlocalhost ip6-localhost ip6-loopback\n');
  const tmp = join(rootfs, 'tmp');
  mkdirSync(tmp, { recursive: true });
  chmodSync(tmp, 0o1777);
}

/** Where the agent reads its key. */
export const AGENT_KEY_FILE = AGENT_PROTOCOL.constants.keyFile;

/**
 * The agent's key, in a file of root's in a directory only root may enter: this gVisor
 * lets every guest user read any process's environment (/proc/N/environ is 0444), so
 * the key cannot go there. Guest root can read it, and is root in that instance anyway.
 */
export function writeAgentKey(rootfs: string, key: string): void {
  const dir = join(rootfs, dirname(AGENT_KEY_FILE));
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chownSync(dir, 0, 0);
  chmodSync(dir, 0o700);
  const file = join(rootfs, AGENT_KEY_FILE);
  writeFileSync(file, `${key}\n`, { mode: 0o400 });
  chownSync(file, 0, 0);
  chmodSync(file, 0o400);
}

/** What waitForAgent may ask of the sandbox being booted. */
export interface BootingSandbox {
  /** Whether its host process still runs. */
  running(): boolean;
  /** The end of what its first process printed (the agent's init logs there). */
  printed(): string;
}

/**
 * Waits for the instance's agent to answer (it is the sandbox's first process, so this
 * is its boot). An agent that does not come up fails the boot with what it printed and
 * what to do: the instance cannot be reached any other way. Given `ready`, the hello
 * asks the agent to check the instance's readiness too: the answer is whether it did
 * (an older agent does not), and a failed check throws as checkReady would.
 */
export async function waitForAgent(endpoint: AgentEndpoint, signal: AbortSignal, sandbox: BootingSandbox, ready?: MachineSpec): Promise<{ readinessChecked: boolean }> {
  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  let last = '';
  let connectTry = 0;
  let polls = 0;
  while (Date.now() < deadline) {
    signal.throwIfAborted();
    if (!sandbox.running()) throw agentDidNotStart('the sandbox ended while it booted: its first process, the agent\'s init, exited', sandbox);
    // The port is tried first, every few milliseconds: the agent's client waits 50 ms
    // between refused connections, a quarter of a boot.
    const listening = await portAnswers(endpoint, BOOT_CONNECT_TRIES_MS[Math.min(connectTry, BOOT_CONNECT_TRIES_MS.length - 1)]!);
    if (listening !== 'connected') {
      if (listening === 'timeout') connectTry++;
      else last = listening;
      // Every few milliseconds at first (a boot takes ~100 ms), then less often: twenty
      // sandboxes booting at once on a small host must not be slowed by their own polls.
      await new Promise((r) => setTimeout(r, Math.min(BOOT_POLL_MAX_MS, BOOT_POLL_MS * BOOT_POLL_GROWTH ** polls++)));
      continue;
    }
    try {
      const hello = await agentCall(endpoint, { op: 'hello', ...(ready ? { ready_check: { home: ready.home, uid: VM_UID, gid: VM_UID } } : {}) });
      if (hello.protocol !== AGENT_PROTOCOL.version) {
        throw agentDidNotStart(`it speaks version ${String(hello.protocol)} of the agent protocol, and this roomkit version ${AGENT_PROTOCOL.version}`, sandbox);
      }
      // The agent's init sets up the root service (images/guest/agent/boot.go).
      if (typeof hello.boot_error === 'string' && hello.boot_error !== '') {
        throw new Error(`could not start the instance's root service: ${hello.boot_error}`);
      }
      if (!ready || typeof hello.ready !== 'object' || hello.ready === null) return { readinessChecked: false };
      const failed = (hello.ready as { error?: unknown }).error;
      if (typeof failed === 'string' && failed !== '') throw notReady(ready, failed);
      return { readinessChecked: true };
    } catch (err) {
      if (err instanceof AgentFailure) throw agentDidNotStart(`the agent refused the host (${err.kind}: ${err.message})`, sandbox);
      if (!(err instanceof AgentUnavailable)) throw err;
      last = err.message;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw agentDidNotStart(`it did not answer within ${BOOT_TIMEOUT_MS / 1000} s${last ? ` (${last})` : ''}`, sandbox);
}

/** Whether a connection to the agent's port is taken within `timeoutMs`: 'connected', 'timeout', or why not. */
function portAnswers(endpoint: AgentEndpoint, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    const done = (outcome: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.once('connect', () => done('connected'));
    socket.once('error', (err) => done(`cannot reach the instance's agent: ${err.message}`));
  });
}

function agentDidNotStart(what: string, sandbox: BootingSandbox): Error {
  const printed = sandbox.printed().trim();
  return new Error(
    `roomkit's agent did not start in the instance, and it is the only way into it: ${what}` +
      (printed ? `; the sandbox printed: ${printed}` : '') +
      `. Every image roomkit builds carries the agent (${GUEST_AGENT}); an image whose agent is missing or broken must be built again: remove it from the image cache (roomkit images prune, once no instance uses it) and create the instance again`,
  );
}

/**
 * Tasks (processes and threads) that the root service and everything started through
 * it may have at once, whatever user they switch to: the agent's init puts the service
 * in a pids cgroup of gVisor's own with this limit (images/guest/agent/boot.go). RLIMIT_NPROC binds each uid
 * (root's included), but guest root may switch to any number of uids; this bounds all
 * of them together, inside gVisor, so that a fork past it fails with EAGAIN instead of
 * reaching the sandbox's host task limit (where the sandbox would die).
 */
export const ROOT_SERVICE_TASKS = AGENT_PROTOCOL.constants.rootServiceTasks;

/**
 * Boots and checks readiness: waits for the agent, asking it to check readiness in its
 * hello, and runs the readiness command only when the agent could not answer for it.
 * `booted` is called once the agent answers, before the command, if any.
 */
export async function bootReady(
  endpoint: AgentEndpoint,
  signal: AbortSignal,
  sandbox: BootingSandbox,
  exec: Exec,
  spec: MachineSpec,
  booted: () => Promise<void> = async () => {},
): Promise<void> {
  const { readinessChecked } = await waitForAgent(endpoint, signal, sandbox, spec);
  await booted();
  if (!readinessChecked) await checkReady(exec, spec);
}

function notReady(spec: MachineSpec, what: string): Error {
  return new Error(`readiness check failed: the VM user ${spec.user} in ${spec.home}: ${what}`);
}

/** The readiness check by a command: as the VM user, in its home, which it can write, it answers with its uid. */
export async function checkReady(exec: Exec, spec: MachineSpec): Promise<void> {
  // `exec`: the shell's last fork is spared (a fork in the guest costs milliseconds).
  const check = await exec(['sh', '-c', 'cd "$HOME" && test -w . && exec id -u'], {
    as: 'vm',
    home: spec.home,
    timeoutMs: BOOT_TIMEOUT_MS,
  });
  if (check.code !== 0 || check.stdout.trim() !== String(VM_UID)) {
    throw new Error(`readiness check failed: a command as ${spec.user} in ${spec.home} answered ${check.code}: ${(check.stderr || check.stdout).trim()}`);
  }
}
