// Looks at the host for what a roomkit data directory's instances hold, so tests can
// prove that a delete, a failure or a crash left nothing behind.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from '../../src/host/run.ts';
import { mountsUnder } from '../../src/host/mounts.ts';
import { tableName } from '../../src/network/firewall.ts';
import { hostTag, type InstanceNetworkNames, listHostInterfaces, listNetns, networkNames } from '../../src/network/netns.ts';
import { runscBinary } from '../../src/runtimes/gvisor/runsc.ts';

export interface HostObjects {
  netns: string[];
  interfaces: string[];
  mounts: string[];
  containers: string[];
  cgroups: string[];
  egressRules: string[];
  sandboxProcesses: number;
}

export async function hostObjects(dataDir: string, instanceIds: string[] = []): Promise<HostObjects> {
  const tag = hostTag(dataDir);
  const list = await run(runscBinary(), [`--root=${join(dataDir, 'runsc')}`, 'list', '--quiet'], { timeoutMs: 10_000 });
  const nft = await run('nft', ['-j', 'list', 'set', 'inet', tableName(tag), 'egress'], { timeoutMs: 10_000 });
  let egressRules: string[] = [];
  if (nft.code === 0) {
    const parsed = JSON.parse(nft.stdout) as { nftables: { set?: { elem?: unknown[] } }[] };
    egressRules = (parsed.nftables.find((e) => e.set)?.set?.elem ?? []).map(String);
  }
  const cgroups = instanceIds.flatMap((id) =>
    readdirSync('/sys/fs/cgroup')
      .map((h) => join('/sys/fs/cgroup', h, 'roomkit', id))
      .filter((dir) => existsSync(dir)),
  );
  const ps = await run('pgrep', ['-f', `runsc-sandbox.*--root=${join(dataDir, 'runsc')}`], { timeoutMs: 10_000 });
  return {
    netns: listNetns(tag),
    interfaces: await listHostInterfaces(tag),
    mounts: mountsUnder(dataDir),
    containers: list.stdout.split('\n').filter(Boolean),
    cgroups,
    egressRules,
    sandboxProcesses: ps.stdout.split('\n').filter(Boolean).length,
  };
}

/** Names read from instances' records, kept so that they are known after the record is gone. */
const recordedNames = new Map<string, InstanceNetworkNames>();

/**
 * The instance's network names: its record's (an instance that took a network slot
 * made ahead has the slot's names), else derived from its id. Once read, they are
 * remembered, so that a check after the instance is gone looks for the right names.
 */
export function instanceNetworkNames(dataDir: string, instanceId: string): InstanceNetworkNames {
  const known = recordedNames.get(instanceId);
  if (known) return known;
  try {
    const meta = JSON.parse(readFileSync(join(dataDir, 'instances', instanceId, 'instance.json'), 'utf8')) as Partial<InstanceNetworkNames>;
    if (meta.netns && meta.hostIf && meta.guestIf) {
      const names = { netns: meta.netns, hostIf: meta.hostIf, guestIf: meta.guestIf };
      recordedNames.set(instanceId, names);
      return names;
    }
  } catch {
    // No record (yet, or any more).
  }
  return networkNames(hostTag(dataDir), instanceId);
}

export const NOTHING: HostObjects = {
  netns: [],
  interfaces: [],
  mounts: [],
  containers: [],
  cgroups: [],
  egressRules: [],
  sandboxProcesses: 0,
};
