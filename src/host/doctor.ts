// Checks whether this host can run roomkit's instances, and says how to fix what is
// missing. Used by `roomkit doctor`; each check is independent and bounded in time.
import { existsSync, readdirSync, readFileSync, statfsSync } from 'node:fs';
import { run } from './run.ts';
import { which } from './which.ts';
import { REQUIRED_PROGRAMS } from '../runtimes/gvisor/probe.ts';

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

export async function runChecks(dataDir: string): Promise<Check[]> {
  const checks: Check[] = [];
  const linux = process.platform === 'linux';
  checks.push({ name: 'linux', ok: linux, detail: `platform ${process.platform}`, fix: 'roomkit runs instances on Linux only' });
  if (!linux) return checks;
  const root = process.getuid?.() === 0;
  checks.push({ name: 'root', ok: root, detail: root ? 'running as root' : `running as uid ${process.getuid?.()}`, fix: 'run roomkit as root: it makes sandboxes, namespaces, mounts and firewall rules' });

  for (const [program, pkg] of Object.entries(REQUIRED_PROGRAMS)) {
    const path = which(program);
    checks.push({ name: program, ok: path !== null, detail: path ?? 'not found', fix: `apt-get install ${pkg}` });
  }

  if (which('runsc')) {
    const version = await run('runsc', ['--version'], { timeoutMs: 10_000 });
    const first = version.stdout.split('\n')[0]?.trim() ?? '';
    checks.push({ name: 'runsc version', ok: version.code === 0, detail: first || version.stderr.trim(), fix: 'reinstall runsc: apt-get install --reinstall runsc' });
    if (root) {
      // A real sandbox: gVisor's own kernel starts and runs a program.
      const sandbox = await run('runsc', ['--network=none', '--platform=ptrace', 'do', '/bin/true'], { timeoutMs: 60_000 });
      checks.push({
        name: 'runsc runs a sandbox',
        ok: sandbox.code === 0,
        detail: sandbox.code === 0 ? 'runsc do /bin/true exited 0' : (sandbox.stderr.trim().split('\n').at(-1) ?? `exit ${sandbox.code}`),
        fix: 'see the error above; gVisor needs ptrace and a kernel it supports',
      });
    }
  }

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

  const forward = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() === '1';
  checks.push({ name: 'ip forwarding', ok: forward, optional: true, detail: forward ? 'on' : 'off (roomkit turns it on at start, for instances with internet egress)' });
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  checks.push({ name: 'kernel.pid_max', ok: pidMax >= 4_194_304, optional: true, detail: `${pidMax}${pidMax < 4_194_304 ? ' (roomkit raises it to 4194304 at start)' : ''}` });

  try {
    const stats = statfsSync(existsSync(dataDir) ? dataDir : '/');
    const free = stats.bavail * stats.bsize;
    checks.push({
      name: 'free disk',
      ok: free >= MIN_FREE_DISK_BYTES,
      detail: `${(free / 1024 ** 3).toFixed(1)} GiB free for ${dataDir}`,
      fix: 'images take about 0.4 GiB each and instances up to their disk_mb: free some space or use --data-dir elsewhere',
      optional: true,
    });
  } catch (err) {
    checks.push({ name: 'free disk', ok: false, optional: true, detail: (err as Error).message });
  }
  return checks;
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
