// What `roomkit doctor` checks of the host whatever runtime runs the instances: the
// platform, the kernel features instances are isolated and limited with, and free disk;
// each says how to fix what is missing. A runtime's own checks live beside it, and the
// command puts them together. Each check is independent and bounded in time.
import { existsSync, readdirSync, readFileSync, statfsSync } from 'node:fs';
import { run } from './run.ts';
import { which } from './which.ts';
import { btrfsAvailable } from './btrfs.ts';

export interface Check {
  name: string;
  ok: boolean;
  /** What was found. */
  detail: string;
  /** How to fix it, when not ok. */
  fix?: string;
  /** A failed optional check is a warning: instances still work. */
  optional?: boolean;
}

const MIN_FREE_DISK_BYTES = 5 * 1024 ** 3;

/** Linux, and root on it. Off Linux, nothing else can be checked. */
export function platformChecks(): Check[] {
  const checks: Check[] = [];
  const linux = process.platform === 'linux';
  checks.push({ name: 'linux', ok: linux, detail: `platform ${process.platform}`, fix: 'roomkit runs instances on Linux only' });
  if (!linux) return checks;
  const root = process.getuid?.() === 0;
  checks.push({ name: 'root', ok: root, detail: root ? 'running as root' : `running as uid ${process.getuid?.()}`, fix: 'run roomkit as root: it makes sandboxes, namespaces, mounts and firewall rules' });
  return checks;
}

/** Overlays, network namespaces, nftables, cgroups and IP forwarding (Linux only). */
export async function kernelChecks(): Promise<Check[]> {
  const checks: Check[] = [];
  const root = process.getuid?.() === 0;
  const overlay = readFileSync('/proc/filesystems', 'utf8').includes('overlay');
  checks.push({ name: 'overlayfs', ok: overlay, detail: overlay ? 'in /proc/filesystems' : 'not loaded', fix: 'modprobe overlay' });

  if (root && which('ip')) {
    const name = `rk-doctor-${process.pid}`;
    const add = await run('ip', ['netns', 'add', name], { timeoutMs: 10_000 });
    if (add.code === 0) await run('ip', ['netns', 'del', name], { timeoutMs: 10_000 });
    checks.push({ name: 'network namespaces', ok: add.code === 0, detail: add.code === 0 ? 'created and removed one' : add.stderr.trim(), fix: 'the kernel needs network namespace support (CONFIG_NET_NS)' });
  }
  if (root && which('nft')) {
    const nft = await run('nft', ['list', 'tables'], { timeoutMs: 10_000 });
    checks.push({ name: 'nftables', ok: nft.code === 0, detail: nft.code === 0 ? 'nft answers' : nft.stderr.trim(), fix: 'apt-get install nftables; the kernel needs nf_tables' });
  }

  checks.push(cgroupCheck());

  // Only profiles with keep_undo need it: their instances' layers are btrfs.
  const btrfs = btrfsAvailable();
  checks.push({ name: 'btrfs (undo)', ok: btrfs.ok, optional: true, detail: btrfs.detail, fix: 'apt-get install btrfs-progs; the kernel needs btrfs (modprobe btrfs); without it, profiles with keep_undo cannot start instances' });

  const forward = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() === '1';
  checks.push({ name: 'ip forwarding', ok: forward, optional: true, detail: forward ? 'on' : 'off (roomkit turns it on at start, for instances with internet egress)' });
  return checks;
}

export function freeDiskCheck(dataDir: string): Check {
  try {
    const stats = statfsSync(existsSync(dataDir) ? dataDir : '/');
    const free = stats.bavail * stats.bsize;
    return {
      name: 'free disk',
      ok: free >= MIN_FREE_DISK_BYTES,
      detail: `${(free / 1024 ** 3).toFixed(1)} GiB free for ${dataDir}`,
      fix: 'images take about 0.4 GiB each and instances up to their disk_mb: free some space or use --data-dir elsewhere',
      optional: true,
    };
  } catch (err) {
    return { name: 'free disk', ok: false, optional: true, detail: (err as Error).message };
  }
}

function cgroupCheck(): Check {
  const base = '/sys/fs/cgroup';
  if (!existsSync(base)) return { name: 'cgroups', ok: false, detail: `${base} not mounted`, fix: 'mount cgroup filesystems' };
  const entries = readdirSync(base);
  if (existsSync(`${base}/cgroup.controllers`)) {
    const controllers = readFileSync(`${base}/cgroup.controllers`, 'utf8').trim().split(/\s+/);
    const missing = ['memory', 'cpu', 'pids'].filter((c) => !controllers.includes(c));
    return { name: 'cgroups', ok: missing.length === 0, detail: `v2 with ${controllers.join(', ')}`, fix: `enable the ${missing.join(', ')} controller(s)` };
  }
  const missing = ['memory', 'cpu', 'pids'].filter((c) => !entries.includes(c));
  return { name: 'cgroups', ok: missing.length === 0, detail: `v1 hierarchies: ${entries.join(', ')}`, fix: `mount the ${missing.join(', ')} hierarchy(ies)` };
}
