// Decides whether the gVisor runtime can run on this host, and says exactly what is
// missing when it cannot.
import { nodeIdOf } from '../../host/node-identity.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { run } from '../../host/run.ts';
import { which } from '../../host/which.ts';
import { ImageStore } from '../../images/builder.ts';
import { hostDnsServers, resolvConfServers } from '../../network/firewall.ts';
import { AddressPool } from '../../network/pool.ts';
import type { RuntimeCandidate } from '../select.ts';
import { GvisorRuntime } from './gvisor-runtime.ts';
import { pinnedRunscVersion, runscAtLeast, runscBinary, runscPlatform, runscVersion } from './runsc.ts';

/** The kernel.pid_max the host gets at start (see below why). */
export const HOST_PID_MAX = 4_194_304;

/**
 * fs.fanotify.max_user_groups the host gets at start when it is lower: files_changed
 * watches each instance with a fanotify group of its own (change-watch.c), all of them
 * root's, and the kernel's default of 128 would leave instances beyond it to the walk.
 */
export const HOST_FANOTIFY_GROUPS = 4096;

/** Programs the runtime calls, with the Debian package that has each. */
export const REQUIRED_PROGRAMS: Record<string, string> = {
  // Where ROOMKIT_RUNSC names another build, that one is called instead.
  runsc: 'runsc',
  // Starts runsc in a mount namespace of its own (runsc.ts, withHiddenNetSysctls).
  unshare: 'util-linux',
  mmdebstrap: 'mmdebstrap',
  nft: 'nftables',
  ip: 'iproute2',
  nsenter: 'util-linux',
  mount: 'mount',
  'mkfs.ext4': 'e2fsprogs',
  // Compiles the layer walker and the guest's compatibility library on first use.
  cc: 'gcc',
};

export const gvisorCandidate: RuntimeCandidate = {
  name: 'gvisor',
  async probe({ config, db, log, metrics }) {
    if (process.platform !== 'linux') return { skipped: 'gVisor runs on Linux only' };
    if (process.getuid?.() !== 0) {
      return { skipped: 'roomkit must run as root to make sandboxes, network namespaces and mounts' };
    }
    const missing = Object.entries(REQUIRED_PROGRAMS).filter(([program]) => which(program === 'runsc' ? runscBinary() : program) === null);
    if (missing.length > 0) {
      const packages = [...new Set(missing.map(([, pkg]) => pkg))].join(' ');
      return {
        skipped: `${missing.map(([p]) => p).join(', ')} not installed (scripts/start installs them; or run: apt-get install ${packages})`,
      };
    }
    if (!readFileSync('/proc/filesystems', 'utf8').includes('overlay')) {
      const loaded = await run('modprobe', ['overlay'], { timeoutMs: 10_000 });
      if (loaded.code !== 0) return { skipped: 'the kernel has no overlayfs (modprobe overlay failed)' };
    }
    let version: string;
    let platform: string;
    try {
      version = await runscVersion();
      platform = runscPlatform();
    } catch (err) {
      return { skipped: `runsc does not run: ${(err as Error).message}` };
    }
    // Older builds have neither the systrap platform nor --net-disconnect-ok.
    const pinned = pinnedRunscVersion();
    if (!runscAtLeast(version, pinned)) {
      return { skipped: `runsc ${version} (${runscBinary()}) is older than ${pinned}, which roomkit needs: run scripts/setup as root to install it` };
    }
    const pool = new AddressPool(db, config.networkPool, nodeIdOf(config.dataDir));
    const images = new ImageStore({ dir: config.imagesDir, ociDir: config.ociDir, log });
    await images.removeAbandonedBuilds();
    const runtime = new GvisorRuntime({
      dataDir: config.dataDir,
      pool,
      images,
      log,
      dnsServers: hostDnsServers(readFileSync('/etc/resolv.conf', 'utf8')),
      egressDnsServers: config.egressDnsServers.length > 0 ? [...config.egressDnsServers] : resolvConfServers(readFileSync('/etc/resolv.conf', 'utf8')),
      ...(metrics ? { onEgressDecision: (d) => metrics.egressDecided(d.kind, d.allowed) } : {}),
      ...(metrics ? { onMemoryGuardKill: (_instanceId, kind) => metrics.memoryGuardKilled(kind) } : {}),
      maxHostTasks: config.maxHostTasksPerInstance,
      networkSlots: config.networkSlots,
      restoresAtOnce: config.restoresAtOnce,
      changeTracking: config.changeTracking,
      changeTrackingMaxPaths: config.changeTrackingMaxPaths,
      undoLimits: { maxPoints: config.undoMaxPoints, maxBytes: config.undoMaxMb * 1024 * 1024 },
    });
    try {
      // Instances with internet egress are routed through the host.
      writeFileSync('/proc/sys/net/ipv4/ip_forward', '1\n');
      // Sandboxes take many host tasks each (see maxHostTasks in bundle.ts); a small pid_max
      // would let one instance's fork bomb use up the host's.
      const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
      if (pidMax < HOST_PID_MAX) {
        writeFileSync('/proc/sys/kernel/pid_max', `${HOST_PID_MAX}\n`);
        log.info({ from: pidMax, to: HOST_PID_MAX }, 'raised kernel.pid_max');
      }
      if (config.changeTracking !== 'walk') raiseFanotifyGroups(log);
      await runtime.start();
    } catch (err) {
      return { skipped: `cannot set up the host network: ${(err as Error).message}` };
    }
    log.info({ runsc: version, platform }, 'gVisor runtime ready');
    return { runtime };
  },
};

/** Raises fs.fanotify.max_user_groups to HOST_FANOTIFY_GROUPS; a kernel without fanotify keeps the walk. */
function raiseFanotifyGroups(log: { info: (o: object, m: string) => void; warn: (o: object, m: string) => void }): void {
  const file = '/proc/sys/fs/fanotify/max_user_groups';
  try {
    const groups = Number(readFileSync(file, 'utf8'));
    if (groups >= HOST_FANOTIFY_GROUPS) return;
    writeFileSync(file, `${HOST_FANOTIFY_GROUPS}\n`);
    log.info({ from: groups, to: HOST_FANOTIFY_GROUPS }, 'raised fs.fanotify.max_user_groups');
  } catch (err) {
    log.warn({ err }, 'cannot read or raise fs.fanotify.max_user_groups: files_changed may be made by walks');
  }
}
