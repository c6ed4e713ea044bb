// A runsc sandbox of an image's root filesystem without the service: what the
// benchmarks' floors are measured on. A fresh overlay, bundle and network namespace
// each (with a veth and addresses when asked for); runsc called as the runtime calls it,
// or with another platform or the host's network stack to compare them.
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, runChecked, type RunResult } from '../src/host/run.ts';
import { mountOverlay, unmountAll } from '../src/host/mounts.ts';
import { DEFAULT_HOST_TASKS_PER_INSTANCE } from '../src/config.ts';
import { ociSpec } from '../src/runtimes/gvisor/bundle.ts';
import { removeCgroups } from '../src/runtimes/gvisor/cgroups.ts';
import { createVethPair, removeNetwork } from '../src/network/netns.ts';
import type { Lease } from '../src/network/pool.ts';
import { Runsc, type RunscPlatform } from '../src/runtimes/gvisor/runsc.ts';
import type { MachineSpec } from '../src/runtimes/types.ts';

export interface RawSandbox {
  id: string;
  netns: string;
  /** runsc in the sandbox's namespace, with the runtime's global flags. */
  runsc(args: string[], outputFd?: number): Promise<RunResult>;
  /** `runsc create` + `start`. */
  start(): Promise<void>;
}

export interface RawSandboxOptions {
  platform?: RunscPlatform;
  /** gVisor's network stack (the runtime's), or the host's in the namespace (runsc's `--network=host`). */
  network?: 'sandbox' | 'host';
  /** A veth into the namespace with these addresses (else the namespace has only its loopback). */
  lease?: Lease;
}

/**
 * Prepares sandbox `name` under `floorDir` (runsc's root is `floorDir/runsc`), hands it
 * to `use`, and removes everything of it afterwards, whatever happened.
 */
export async function withRawSandbox(
  floorDir: string,
  name: string,
  image: { rootfs: string },
  spec: MachineSpec,
  use: (sandbox: RawSandbox) => Promise<void>,
  options: RawSandboxOptions = {},
): Promise<void> {
  const runscRoot = join(floorDir, 'runsc');
  const dir = join(floorDir, name);
  for (const d of ['upper', 'work', 'rootfs', 'bundle']) mkdirSync(join(dir, d), { recursive: true });
  mkdirSync(runscRoot, { recursive: true });
  const id = `${name}-${process.pid}`;
  const netns = `rkb-${process.pid.toString(36)}-${name}`;
  const network = options.network ?? 'sandbox';
  const runner = new Runsc({ root: runscRoot, network, ...(options.platform ? { platform: options.platform } : {}) });
  const veth = { netns, hostIf: `rkb${process.pid.toString(36)}${name}`.slice(0, 15), guestIf: `rkg${process.pid.toString(36)}${name}`.slice(0, 15) };
  const runsc = (args: string[], outputFd?: number) => runner.callChecked(netns, args, outputFd === undefined ? {} : { outputFd });
  try {
    await mountOverlay({ lower: image.rootfs, upper: join(dir, 'upper'), work: join(dir, 'work'), target: join(dir, 'rootfs') });
    mkdirSync(join(dir, 'rootfs', 'tmp'), { recursive: true });
    writeFileSync(join(dir, 'bundle', 'config.json'), JSON.stringify(ociSpec({ instanceId: id, rootfs: join(dir, 'rootfs'), hostname: 'floor', spec, maxHostTasks: DEFAULT_HOST_TASKS_PER_INSTANCE, ...(network === 'sandbox' ? { netnsPath: `/var/run/netns/${netns}` } : {}) })));
    await runChecked('ip', ['netns', 'add', netns], { timeoutMs: 10_000 });
    if (options.lease) await createVethPair(veth, options.lease);
    await use({
      id,
      netns,
      runsc,
      async start() {
        const fd = openSync(join(dir, 'console.log'), 'a');
        try {
          await runsc(['create', `--bundle=${join(dir, 'bundle')}`, id], fd);
        } finally {
          closeSync(fd);
        }
        await runsc(['start', id]);
      },
    });
  } finally {
    await runner.call(netns, ['delete', '--force', id]);
    if (options.lease) await removeNetwork(veth);
    await run('ip', ['netns', 'del', netns], { timeoutMs: 10_000 });
    await unmountAll(dir);
    removeCgroups(id);
  }
}
