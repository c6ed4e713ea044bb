// The OCI runtime spec (config.json) of an instance's sandbox: what runs as its init,
// which namespaces it gets, and the limits the kernel and gVisor enforce.
import { GUEST_AGENT } from '../../images/guest-additions.ts';
import { PATH_ENV } from '../agent/commands.ts';
import type { MachineSpec } from '../types.ts';
import { sandboxCgroupsPath } from './cgroups.ts';

/**
 * The host cgroup limits the whole sandbox: gVisor's own kernel and file server as well
 * as the instance's processes. Its limit is memory_mb plus this headroom, so that the
 * limit the instance feels is the memory guard's (at memory_mb) and the host limit stays
 * a backstop. The headroom must outlast the guard's reaction time at the fastest rate a
 * process allocates (about 300 MiB/s was seen): with 256 MiB, a sandbox under CPU
 * contention sometimes reached the host limit first and died.
 */
export function sandboxMemoryLimitMb(memoryMb: number): number {
  return memoryMb + Math.max(512, Math.ceil(memoryMb / 2));
}
/** Processes (and threads) the VM user may have at once inside the instance. */
export const INSTANCE_NPROC = 128;
/** Open files per process inside the instance. */
export const INSTANCE_NOFILE = 8192;
const CPU_PERIOD_US = 100_000;

export const CAPABILITIES = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID',
  'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_MKNOD', 'CAP_AUDIT_WRITE', 'CAP_SETFCAP',
];

export interface BundleOptions {
  instanceId: string;
  rootfs: string;
  hostname: string;
  spec: MachineSpec;
  /**
   * Host tasks the whole sandbox may have: its host cgroup's pids limit, a backstop to
   * the guest's own limits (RLIMIT_NPROC per user, and the root service's pids cgroup
   * inside gVisor, see agent/boot.ts), which make a guest's fork fail with EAGAIN long
   * before. Under the ptrace platform each guest process costs a traced host process
   * with a thread for every gVisor thread that has run it, kept for reuse after the
   * process ends, so a sandbox holds many more host tasks than it has guest processes;
   * under systrap (the default, see runsc.ts) it levels off at about a hundred. A
   * sandbox that cannot make a host thread dies (measured: at the limit runsc's
   * sandbox exits), which is why the guest's limits must bind first.
   */
  maxHostTasks: number;
  /**
   * roomkit's agent is the sandbox's first process (`agent init`, which reaps orphans
   * and keeps the agent's server running; its key is a file, see agent/boot.ts), as in
   * every instance; without, tini is: the benchmarks' floor, a bare sandbox reached by
   * `runsc exec`.
   */
  agent?: boolean;
  /**
   * The instance's network namespace (its path under /var/run/netns), which the sandbox
   * joins: gVisor's network stack takes over the namespace's interfaces (their addresses
   * and routes) when the sandbox starts. Without one the sandbox stays in runsc's own
   * namespace (for sandboxes with `--network=none`).
   */
  netnsPath?: string;
}

export function ociSpec(options: BundleOptions): object {
  const { spec } = options;
  const initCaps = options.agent ? [...CAPABILITIES, 'CAP_SYS_ADMIN'] : CAPABILITIES;
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      // The init runs as root, so the VM user cannot kill it (which would end the
      // sandbox); the limits below still bind every process of the VM user.
      user: { uid: 0, gid: 0 },
      // The first process reaps orphans, so background processes that exit leave no
      // zombies: the agent's init, or tini. No secret goes in this environment: this
      // gVisor lets every guest user read /proc/1/environ.
      args: options.agent ? [GUEST_AGENT, 'init'] : ['/usr/bin/tini', '-s', '--', 'sleep', 'infinity'],
      env: [PATH_ENV, 'HOME=/root', 'LANG=C.UTF-8'],
      cwd: '/',
      // The agent's init alone holds CAP_SYS_ADMIN, for its boot setup, and drops it before
      // anything else starts (images/guest/agent/boot.go), so every process of the guest,
      // all started by the agent, is without it.
      capabilities: {
        bounding: initCaps,
        effective: initCaps,
        permitted: initCaps,
        inheritable: [],
        ambient: [],
      },
      rlimits: [
        { type: 'RLIMIT_NOFILE', hard: INSTANCE_NOFILE, soft: INSTANCE_NOFILE },
        { type: 'RLIMIT_NPROC', hard: INSTANCE_NPROC, soft: INSTANCE_NPROC },
      ],
      // sudo (setuid) must work for the VM user: the instance is the isolation boundary.
      noNewPrivileges: false,
    },
    root: { path: options.rootfs, readonly: false },
    hostname: options.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      // /tmp is the root filesystem's own directory (runsc would otherwise put a tmpfs
      // there), so files written to /tmp count against disk_mb and show up as changes.
      { destination: '/tmp', type: 'bind', source: `${options.rootfs}/tmp`, options: ['rbind', 'rw'] },
    ],
    linux: {
      namespaces: [
        { type: 'pid' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        ...(options.netnsPath === undefined ? [] : [{ type: 'network', path: options.netnsPath }]),
      ],
      cgroupsPath: sandboxCgroupsPath(options.instanceId),
      resources: {
        memory: { limit: sandboxMemoryLimitMb(spec.memory_mb) * 1024 * 1024 },
        cpu: { quota: spec.vcpus * CPU_PERIOD_US, period: CPU_PERIOD_US },
        pids: { limit: options.maxHostTasks },
      },
    },
  };
}
