// runsc's two platforms side by side, on the runtime's own set-up (gVisor's network
// stack in a namespace with a veth): create+start, to the first exec, `exec true`, a
// sandbox's idle memory (PSS of its host processes), and the host tasks it keeps after
// each of several bursts of short guest processes started at once. The evidence behind
// the platform runsc.ts chooses (docs/architecture.md, "runsc's platform"). Rounds
// interleave the platforms so that a busy moment of the host does not fall on one only.
//
//   npm run bench:platform   (as root; ROOMKIT_BENCH_RUNS=5 rounds by default,
//                             ROOMKIT_BENCH_BURSTS=4 bursts of 200 processes;
//                             ROOMKIT_IMAGES_DIR for a cache of images already built)
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/config.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import { createLogger } from '../src/log.ts';
import { processesOf } from '../src/runtimes/gvisor/cgroups.ts';
import { RUNSC_PLATFORMS, type RunscPlatform } from '../src/runtimes/gvisor/runsc.ts';
import { hostView } from './memory-sampler.ts';
import { withRawSandbox } from './raw-sandbox.ts';
import { percentile } from './stats.ts';

const ROUNDS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 5);
const BURSTS = Number(process.env.ROOMKIT_BENCH_BURSTS ?? 4);
const BURST_PROCESSES = 200;
/** One /30 of its own, outside the pools the service and the other benchmarks use. */
const LEASE = { slot: 0, hostAddress: '10.219.250.1', guestAddress: '10.219.250.2', prefixLength: 30 as const };

/** Host tasks (threads) of every process in the sandbox's cgroup. */
function hostTasks(id: string): number {
  let tasks = 0;
  for (const pid of processesOf(id) ?? []) {
    try {
      tasks += readdirSync(`/proc/${pid}/task`).length;
    } catch {
      // ended since the cgroup was read
    }
  }
  return tasks;
}

interface Figures {
  createStart: number[];
  firstExec: number[];
  execTrue: number[];
  idlePssMb: number[];
  /** Host tasks after each burst, per round that ran them. */
  tasksAfterBursts: number[][];
}

const log = createLogger('warn');
const config = loadConfig({ logLevel: 'warn' });
const images = new ImageStore({ dir: config.imagesDir, log });
const image = await images.ensure({ image: PROFILE_DEFAULTS.image, packages: [], user: PROFILE_DEFAULTS.user, home: '/home/user' });
const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };
const floorDir = mkdtempSync(join(tmpdir(), 'roomkit-bench-platform-'));
const figures = Object.fromEntries(
  RUNSC_PLATFORMS.map((p) => [p, { createStart: [], firstExec: [], execTrue: [], idlePssMb: [], tasksAfterBursts: [] }]),
) as unknown as Record<RunscPlatform, Figures>;

// Each burst: the processes at once (as a build or a test runner starts them), then
// all of them waited for; what the sandbox holds after it is what it keeps.
const burst = `i=0; while [ $i -lt ${BURST_PROCESSES} ]; do sleep 0.2 & i=$((i+1)); done; wait`;

try {
  console.log(`runsc platforms, ${ROUNDS} rounds each (interleaved), gVisor's network stack, image ${image.key}\n`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const platform of RUNSC_PLATFORMS) {
      const f = figures[platform];
      await withRawSandbox(
        floorDir,
        `${platform.slice(0, 2)}${round}`,
        image,
        spec,
        async (sandbox) => {
          const started = performance.now();
          await sandbox.start();
          f.createStart.push(performance.now() - started);
          await sandbox.runsc(['exec', '--user=1000:1000', sandbox.id, '/bin/true']);
          f.firstExec.push(performance.now() - started);
          for (let i = 0; i < 5; i++) {
            const t = performance.now();
            await sandbox.runsc(['exec', '--user=1000:1000', sandbox.id, '/bin/true']);
            f.execTrue.push(performance.now() - t);
          }
          await sleep(1000);
          f.idlePssMb.push((hostView(sandbox.id)?.total.pss ?? Number.NaN) / 1024 / 1024);
          // The bursts are the slow part: the first round's only.
          if (round === 0) {
            const after = [hostTasks(sandbox.id)];
            for (let b = 0; b < BURSTS; b++) {
              await sandbox.runsc(['exec', '--user=1000:1000', sandbox.id, '/bin/sh', '-c', burst]);
              await sleep(500);
              after.push(hostTasks(sandbox.id));
            }
            f.tasksAfterBursts.push(after);
          }
        },
        { platform, lease: LEASE },
      );
    }
  }
  const p50 = (v: number[]) => percentile(v, 50).toFixed(1).padStart(7);
  console.log('platform   create+start   to first exec   exec true   idle PSS (MB)   host tasks: idle, then after each burst');
  for (const platform of RUNSC_PLATFORMS) {
    const f = figures[platform];
    console.log(
      `${platform.padEnd(10)} ${p50(f.createStart)} ms     ${p50(f.firstExec)} ms      ${p50(f.execTrue)} ms  ${p50(f.idlePssMb)}         ${f.tasksAfterBursts.map((t) => t.join(' → ')).join('; ')}`,
    );
  }
  console.log(`\n(p50; each burst: ${BURST_PROCESSES} guest processes started at once by one shell, then waited for)`);
} finally {
  await images.close();
  rmSync(floorDir, { recursive: true, force: true });
}
