// Bringing an instance's guest up: the files it needs written into its root before any
// of its code runs, then, once runsc has started the sandbox, waiting for its init to
// answer, starting its root service and checking that a command runs as the VM user.
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { RunResult } from '../../host/run.ts';
import { type AgentEndpoint, agentCall, AgentUnavailable } from '../agent/client.ts';
import { VM_UID } from '../../images/builder.ts';
import { ROOT_SERVICE } from '../../images/guest-additions.ts';
import type { MachineSpec } from '../types.ts';
import type { ExecOptions } from './guest-exec.ts';

export const BOOT_TIMEOUT_MS = 15_000;

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

/** Where the agent reads its key (images/guest/agent/serve.go keyFile). */
export const AGENT_KEY_FILE = '/run/roomkit-agent/key';

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

export async function waitForInit(exec: Exec, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  let last = '';
  while (Date.now() < deadline) {
    signal.throwIfAborted();
    const result = await exec(['/bin/true'], { as: 'root', timeoutMs: BOOT_TIMEOUT_MS });
    if (result.code === 0) return;
    last = result.stderr.trim();
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the sandbox's init did not answer within ${BOOT_TIMEOUT_MS / 1000} s${last ? `: ${last}` : ''}`);
}

/** Waits for the instance's agent to answer (it is the sandbox's first process, so this is its boot). */
export async function waitForAgent(endpoint: AgentEndpoint, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  let last = '';
  while (Date.now() < deadline) {
    signal.throwIfAborted();
    try {
      const hello = await agentCall(endpoint, { op: 'hello' });
      // The agent's init sets up the root service (images/guest/agent/boot.go).
      if (typeof hello.boot_error === 'string' && hello.boot_error !== '') {
        throw new Error(`could not start the instance's root service: ${hello.boot_error}`);
      }
      return;
    } catch (err) {
      if (!(err instanceof AgentUnavailable)) throw err;
      last = err.message;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`the instance's agent did not answer within ${BOOT_TIMEOUT_MS / 1000} s${last ? `: ${last}` : ''}`);
}

/**
 * Tasks (processes and threads) that the root service and everything started through
 * it may have at once, whatever user they switch to. RLIMIT_NPROC binds each uid
 * (root's included), but guest root may switch to any number of uids; this bounds all
 * of them together, inside gVisor, so that a fork past it fails with EAGAIN instead of
 * reaching the sandbox's host task limit (where the sandbox would die).
 */
export const ROOT_SERVICE_TASKS = 256;
/** Where the boot mounts gVisor's pids cgroup controller; covered by a read-only tmpfs once set up. */
const PIDS_MOUNT = '/run/.roomkit-pids';
/** Only the boot's setup gets these: no guest process has CAP_SYS_ADMIN, so none can mount the controller again. */
const SETUP_CAPS = ['CAP_SYS_ADMIN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER'];

/**
 * Starts the guest's root service (images/guest/rootd.py), through which its `sudo`
 * works; images without it or without python3 simply have no sudo. The service runs in
 * a pids cgroup of gVisor's own with ROOT_SERVICE_TASKS as its limit, which everything
 * it starts inherits. Once the service is in it, the controller's mount is covered by
 * an empty read-only tmpfs (unmounting it would drop the hierarchy and its limit), so
 * that guest root, which lacks CAP_SYS_ADMIN to unmount or mount, can neither raise
 * the limit nor move out.
 */
export async function startRootService(exec: Exec): Promise<void> {
  const setup = await exec(
    ['sh', '-c', `set -e; mkdir -p ${PIDS_MOUNT}; mount -t cgroup -o pids roomkit ${PIDS_MOUNT}; mkdir ${PIDS_MOUNT}/sudo; echo ${ROOT_SERVICE_TASKS} > ${PIDS_MOUNT}/sudo/pids.max`],
    { as: 'root', caps: SETUP_CAPS, timeoutMs: BOOT_TIMEOUT_MS },
  );
  if (setup.code !== 0) throw new Error(`could not limit the instance's root service (exit ${setup.code}): ${(setup.stderr || setup.stdout).trim()}`);
  // Started in the background from a shell inside (this runsc's `exec --detach` fails),
  // with no descriptor of ours, so it outlives this call and holds no pipe open.
  const script = `[ -f ${ROOT_SERVICE} ] && command -v python3 >/dev/null || exit 0; echo $$ > ${PIDS_MOUNT}/sudo/cgroup.procs || exit 1; setsid python3 ${ROOT_SERVICE} </dev/null >/dev/null 2>&1 &`;
  const result = await exec(['sh', '-c', script], { as: 'root', timeoutMs: BOOT_TIMEOUT_MS });
  const cover = await exec(['sh', '-c', `mount -t tmpfs -o ro,mode=000,size=4k roomkit ${PIDS_MOUNT}`], { as: 'root', caps: SETUP_CAPS, timeoutMs: BOOT_TIMEOUT_MS });
  if (result.code !== 0) {
    throw new Error(`could not start the instance's root service (exit ${result.code}${result.timedOut ? ', timed out' : ''}): ${(result.stderr || result.stdout).trim()}`);
  }
  if (cover.code !== 0) throw new Error(`could not hide the instance's pids controller (exit ${cover.code}): ${(cover.stderr || cover.stdout).trim()}`);
}

/** The readiness check: a command as the VM user, in its home, which it can write, answers with its uid. */
export async function checkReady(exec: Exec, spec: MachineSpec): Promise<void> {
  const check = await exec(['sh', '-c', 'cd "$HOME" && test -w . && id -u'], {
    as: 'vm',
    home: spec.home,
    timeoutMs: BOOT_TIMEOUT_MS,
  });
  if (check.code !== 0 || check.stdout.trim() !== String(VM_UID)) {
    throw new Error(`readiness check failed: a command as ${spec.user} in ${spec.home} answered ${check.code}: ${(check.stderr || check.stdout).trim()}`);
  }
}
