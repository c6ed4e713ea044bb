// What files_changed costs, with fanotify (ROOMKIT_CHANGE_TRACKING=fanotify) and with
// the walk (=walk) side by side, each on a service and instance of its own:
// - `true` with an empty writable layer and with 50,000 files in it, next to `runsc exec
//   true` (which itself slows down with a bigger layer) and to the tracker's own
//   snapshot and diff of the layer without a command between them: what tracking costs
//   a command that changes nothing (target: at most 2 ms more with the 50,000 files);
// - a command that creates 10,000 files, next to the same command run by `runsc exec`
//   without the service (its floor);
// - the change watcher's resident memory, with the layer full.
//
//   npm run bench:changes      (as root; ROOMKIT_BENCH_RUNS=20 by default; both services
//                               share one image cache, ROOMKIT_IMAGES_DIR when set)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../src/host/run.ts';
import { Runsc } from '../src/runtimes/gvisor/runsc.ts';
import type { LayerChangeTracking } from '../src/runtimes/layer-changes/tracking.ts';
import { benchInstance, startBenchService } from './setup.ts';
import { percentile, summary, timed } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);
const BIG_RUNS = Math.max(3, Math.round(RUNS / 4));
const LAYER_FILES = 50_000;
const CREATED_FILES = 10_000;

interface Figures {
  empty: number[];
  full: number[];
  emptyFloor: number[];
  fullFloor: number[];
  emptyTracker: number[];
  fullTracker: number[];
  create: number[];
  createFloor: number[];
  methods: Set<string>;
  watcherRssKb: number | undefined;
}

/** The change watcher's resident memory (KiB), if one runs under this process. */
function watcherRss(): number | undefined {
  const lines = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)]).toString().split('\n');
  const pid = lines.find((l) => /change-watch/.test(l))?.trim().split(/\s+/)[0];
  if (!pid) return undefined;
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : undefined;
}

async function measure(method: 'fanotify' | 'walk', pool: string, imagesDir: string): Promise<Figures> {
  const bench = await startBenchService(pool, { changeTracking: method, imagesDir });
  const { runtime, headers, dataDir } = bench;
  try {
    const { roomUrl, id, netns } = await benchInstance(bench, 'bench-changes');
    const methods = new Set<string>();
    const exec = async (command: string) => {
      const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers, body: JSON.stringify({ command }) });
      const body = (await res.json()) as { result?: { exit_code: number; files_changed_total: number; files_changed_method?: string } };
      if (res.status !== 200 || body.result?.exit_code !== 0) throw new Error(`${command} answered ${res.status}: ${JSON.stringify(body)}`);
      return body.result;
    };
    const rawExec = async (command: string) => {
      const result = await run(
        'nsenter',
        new Runsc({ root: join(dataDir, 'runsc') }).argv(netns, ['exec', '--user=1000:1000', '--cwd=/home/user', id, 'sh', '-c', command]).slice(1),
        { timeoutMs: 600_000 },
      );
      if (result.code !== 0) throw new Error(`runsc exec ${command}: ${result.stderr}`);
    };
    const tracked = async (command: string) => {
      const result = await exec(command);
      methods.add(result.files_changed_method ?? 'none');
      return result;
    };

    // The runtime's tracker, called as runCommand calls it, with no command in between.
    const tracker = (runtime as unknown as { changeTracker: LayerChangeTracking }).changeTracker;
    const upper = join(dataDir, 'instances', id, 'layer', 'upper');
    const imageKey = (JSON.parse(readFileSync(join(dataDir, 'instances', id, 'instance.json'), 'utf8')) as { imageKey: string }).imageKey;
    const image = { key: imageKey, rootfs: join(imagesDir, imageKey, 'rootfs') };
    // The three are taken in turn, run by run, so that each sees the same host (a layer
    // just filled keeps the disk busy for a while after).
    const inTurn = async () => {
      const http: number[] = [];
      const floor: number[] = [];
      const alone: number[] = [];
      await timed(RUNS, async () => {
        let started = performance.now();
        await tracked('true');
        http.push(performance.now() - started);
        started = performance.now();
        await rawExec('true');
        floor.push(performance.now() - started);
        started = performance.now();
        await tracker.diff(await tracker.mark(id, upper), upper, image);
        alone.push(performance.now() - started);
      });
      return [http, floor, alone] as const;
    };

    await exec('true'); // warm: the walker, the watcher and the image's index
    const [empty, emptyFloor, emptyTracker] = await inTurn();
    await exec(`mkdir -p many && cd many && seq 1 ${LAYER_FILES} | xargs touch`);
    const [full, fullFloor, fullTracker] = await inTurn();
    const watcherRssKb = watcherRss();

    // Each run creates the files anew; removing them (by runsc exec, untracked) and the
    // `true` after it, which takes up what the removal touched, are not timed.
    const createCommand = `mkdir fresh && cd fresh && seq 1 ${CREATED_FILES} | xargs touch`;
    const create: number[] = [];
    const createFloor: number[] = [];
    for (let i = 0; i < BIG_RUNS; i++) {
      let started = performance.now();
      const result = await tracked(createCommand);
      create.push(performance.now() - started);
      if (result.files_changed_total !== CREATED_FILES) throw new Error(`created ${CREATED_FILES} files, listed ${result.files_changed_total}`);
      await rawExec('rm -rf fresh');
      await exec('true');
      started = performance.now();
      await rawExec(createCommand);
      createFloor.push(performance.now() - started);
      await rawExec('rm -rf fresh');
      await exec('true');
    }
    return { empty, full, emptyFloor, fullFloor, emptyTracker, fullTracker, create, createFloor, methods, watcherRssKb };
  } finally {
    await bench.close();
  }
}

console.log(`roomkit files_changed benchmark, ${RUNS} runs (${BIG_RUNS} for the ${CREATED_FILES.toLocaleString('en')}-file command), one instance per method\n`);
const results: Record<string, Figures> = {};
const imagesDir = process.env.ROOMKIT_IMAGES_DIR ?? mkdtempSync(join(tmpdir(), 'roomkit-bench-images-'));
try {
  for (const method of ['fanotify', 'walk'] as const) {
    console.log(`measuring with ${method}...`);
    results[method] = await measure(method, '10.238.0.128/25', imagesDir);
  }
} finally {
  if (process.env.ROOMKIT_IMAGES_DIR === undefined) rmSync(imagesDir, { recursive: true, force: true });
}
console.log('');

for (const [method, f] of Object.entries(results)) {
  console.log(`${method} (results said: ${[...f.methods].join(', ')})`);
  const more = (a: number[], b: number[]) => `${(percentile(b, 50) - percentile(a, 50)).toFixed(1)} ms`;
  const files = `${LAYER_FILES.toLocaleString('en')} files`;
  console.log(`  POST .../command true, empty layer                      ${summary(f.empty)}`);
  console.log(`  POST .../command true, ${files} in the layer          ${summary(f.full)}`);
  console.log(`  floor: runsc exec true, empty layer                     ${summary(f.emptyFloor)}`);
  console.log(`  floor: runsc exec true, ${files} in the layer         ${summary(f.fullFloor)}`);
  console.log(`  tracker alone (snapshot + diff), empty layer            ${summary(f.emptyTracker)}`);
  console.log(`  tracker alone (snapshot + diff), ${files}           ${summary(f.fullTracker)}`);
  console.log(`  the ${files}, p50: +${more(f.empty, f.full)} to the command, +${more(f.emptyFloor, f.fullFloor)} to its floor, +${more(f.emptyTracker, f.fullTracker)} to the tracker`);
  console.log(`  POST .../command creating ${CREATED_FILES.toLocaleString('en')} files (listed)        ${summary(f.create)}`);
  console.log(`  floor: the same by runsc exec, nothing listed             ${summary(f.createFloor)}`);
  if (f.watcherRssKb !== undefined) console.log(`  change watcher RSS with ${LAYER_FILES.toLocaleString('en')} files in the layer: ${(f.watcherRssKb / 1024).toFixed(1)} MiB`);
  console.log('');
}
