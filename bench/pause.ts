// Pause and resume through the HTTP API, of an idle instance holding a 100 MB working
// set (a background process with 100 MB of random data in its memory), a command on a
// paused instance, and the disk a paused instance holds; beside floors measured in the
// same run: raw `runsc checkpoint` and `runsc restore` of the same kind of sandbox (the
// same image, runsc, flags and network stack, in a namespace of its own, a process
// under init holding the same 100 MB), with each compression runsc offers, and a cold
// create through the service; and a resume asked as soon as its pause has answered.
// Targets (issue 21): pause and resume each within 1.2 times the raw checkpoint and
// restore, resume p50 at most 300 ms, a command on a paused instance at most 400 ms.
//
//   npm run bench:pause      (as root; ROOMKIT_BENCH_RUNS=10 by default)
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import { CHECKPOINT_COMPRESSIONS, type CheckpointCompression } from '../src/runtimes/gvisor/checkpoint.ts';
import { withRawSandbox } from './raw-sandbox.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 10);
const WORKING_SET_MB = 100;
/** A background process holding WORKING_SET_MB of random data, started when none holds it yet. */
const HOLD_MEMORY =
  `pgrep -x perl >/dev/null || { (nohup perl -e 'open F, "/dev/urandom"; read F, $x, ${WORKING_SET_MB} * 1048576; close F; ` +
  `open D, ">/tmp/ws.ready"; close D; sleep 100000' >/dev/null 2>&1 &); while [ ! -e /tmp/ws.ready ]; do sleep 0.1; done; }`;

const bench = await startBenchService('10.245.0.128/25');
const { config, log, base, headers, dataDir } = bench;

async function post(url: string, expectStatus: number): Promise<Record<string, any>> {
  const res = await fetch(url, { method: 'POST', headers, body: '{}' });
  const body = (await res.json()) as Record<string, any>;
  if (res.status !== expectStatus) throw new Error(`POST ${url} answered ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

async function command(roomUrl: string, text: string): Promise<string> {
  const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers, body: JSON.stringify({ command: text }) });
  const body = (await res.json()) as { result?: { output: string; exit_code: number } };
  if (res.status !== 200 || body.result?.exit_code !== 0) throw new Error(`command ${text} answered ${res.status}: ${JSON.stringify(body)}`);
  return body.result.output;
}

/** Bytes a file takes on disk (its allocated blocks), and its apparent size. */
function diskUse(path: string): { allocated: number; apparent: number } {
  const st = statSync(path);
  if (!st.isDirectory()) return { allocated: st.blocks * 512, apparent: st.size };
  let allocated = st.blocks * 512;
  let apparent = 0;
  for (const name of readdirSync(path)) {
    const sub = diskUse(join(path, name));
    allocated += sub.allocated;
    apparent += sub.apparent;
  }
  return { allocated, apparent };
}

/**
 * Raw checkpoint/restore floor of the same kind of sandbox: the image's root filesystem,
 * runsc with the runtime's flags on its own network stack in a namespace of its own,
 * and as the first process a shell (its stdio off the host's descriptors, as the agent's
 * init does) whose perl holds the working set. Restored when `runsc exec` answers again.
 */
async function rawCheckpointFloor(rootfs: string, runs: number, compression: CheckpointCompression) {
  const checkpoint: number[] = [];
  const restore: number[] = [];
  const imageBytes: number[] = [];
  const floorDir = join(dataDir, 'floor');
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user', network: { egress: 'none' as const } };
  const hold = `exec </dev/null >/dev/null 2>&1; exec perl -e 'open F, "/dev/urandom"; read F, $x, ${WORKING_SET_MB} * 1048576; close F; open D, ">/tmp/ws.ready"; close D; sleep 100000'`;
  for (let i = 0; i < runs; i++) {
    const name = `c${compression === 'none' ? 'n' : 'f'}${i}`;
    await withRawSandbox(floorDir, name, { rootfs }, spec, async (sandbox) => {
      const bundle = join(floorDir, name, 'bundle', 'config.json');
      const oci = JSON.parse(readFileSync(bundle, 'utf8')) as { process: { args: string[] } };
      oci.process.args = ['/bin/sh', '-c', hold];
      writeFileSync(bundle, JSON.stringify(oci));
      await sandbox.start();
      for (let tries = 0; ; tries++) {
        const ready = await sandbox.runsc(['exec', sandbox.id, '/bin/sh', '-c', 'test -e /tmp/ws.ready']).then(() => true, () => false);
        if (ready) break;
        if (tries > 300) throw new Error('the floor\'s working set was not made in 30 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      const image = join(floorDir, name, 'image');
      let started = performance.now();
      await sandbox.runsc(['checkpoint', `--image-path=${image}`, `--compression=${compression}`, sandbox.id]);
      checkpoint.push(performance.now() - started);
      imageBytes.push(diskUse(image).allocated);
      await sandbox.runsc(['delete', '--force', sandbox.id]);
      started = performance.now();
      await sandbox.runsc(['restore', '--detach', `--image-path=${image}`, `--bundle=${join(floorDir, name, 'bundle')}`, sandbox.id]);
      await sandbox.runsc(['exec', sandbox.id, '/bin/true']);
      restore.push(performance.now() - started);
    });
  }
  return { checkpoint, restore, imageBytes };
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

try {
  console.log(`roomkit pause benchmark, ${RUNS} runs each, cached image, ${WORKING_SET_MB} MB working set\n`);
  const profileRes = await fetch(`${base}/api/profiles`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'pause', network: { egress: 'none' }, idle_timeout_s: 0 }),
  });
  const profile = (await profileRes.json()) as { profile_id: string; image: string; packages: string[]; user: string; home: string; disk_mb: number };

  // Floor: cold creates through the service (after one that builds or finds the image).
  await post(`${base}/api/profile/${profile.profile_id}/room/warm-up`, 201);
  await fetch(`${base}/api/profile/${profile.profile_id}/room/warm-up`, { method: 'DELETE', headers });
  const cold: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const url = `${base}/api/profile/${profile.profile_id}/room/cold-${i}`;
    const started = performance.now();
    await post(url, 201);
    cold.push(performance.now() - started);
    await fetch(url, { method: 'DELETE', headers });
  }

  // Pause and resume of one instance; the working set is made again before a pause
  // only when the last one did not keep it.
  const roomUrl = `${base}/api/profile/${profile.profile_id}/room/bench`;
  const instance = await post(roomUrl, 201);
  await command(roomUrl, 'head -c 20M /dev/urandom > work.bin');
  const paused: number[] = [];
  const resumed: number[] = [];
  const firstCommand: number[] = [];
  const resumedAtOnce: number[] = [];
  let held = { allocated: 0, apparent: 0 };
  let memoryKept: boolean | undefined;
  for (let i = 0; i < RUNS; i++) {
    await command(roomUrl, HOLD_MEMORY);
    let started = performance.now();
    const body = await post(`${roomUrl}/pause`, 200);
    paused.push(performance.now() - started);
    memoryKept = body.pause?.memory_kept;
    // Its layer's file and its saved memory (the layer is still mounted: its mount points are not walked).
    const dir = join(dataDir, 'instances', instance.instance_id);
    const parts = ['disk.img', 'checkpoint'].map((name) => join(dir, name)).filter((path) => existsSync(path)).map(diskUse);
    held = { allocated: parts.reduce((sum, p) => sum + p.allocated, 0), apparent: parts.reduce((sum, p) => sum + p.apparent, 0) };
    // An idle paused instance: the host has reaped its sandbox (a resume right after a
    // pause waits for that, about 1.5 s).
    await bench.runtime.releasesSettled();
    started = performance.now();
    await post(`${roomUrl}/resume`, 200);
    resumed.push(performance.now() - started);
    // A command on a paused instance: resume and the command in one request.
    await post(`${roomUrl}/pause`, 200);
    await bench.runtime.releasesSettled();
    started = performance.now();
    await command(roomUrl, 'true');
    firstCommand.push(performance.now() - started);
    // A resume asked as soon as its pause has answered (the pause's release still running).
    await post(`${roomUrl}/pause`, 200);
    started = performance.now();
    await post(`${roomUrl}/resume`, 200);
    resumedAtOnce.push(performance.now() - started);
  }
  await fetch(roomUrl, { method: 'DELETE', headers });

  const images = new ImageStore({ dir: config.imagesDir, log });
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });
  const floors = [];
  for (const compression of CHECKPOINT_COMPRESSIONS) floors.push({ compression, ...(await rawCheckpointFloor(image.rootfs, RUNS, compression)) });
  const floor = floors[0]!;
  const p50 = (values: number[]) => percentile(values, 50);

  console.log(`roomkit POST …/pause -> paused (HTTP), memory_kept: ${memoryKept}       ${summary(paused)}`);
  console.log(`roomkit POST …/resume -> ready (HTTP)                           ${summary(resumed)}`);
  console.log(`roomkit command on a paused instance (resume + \`true\`)          ${summary(firstCommand)}`);
  console.log(`roomkit POST …/resume right after its pause answered           ${summary(resumedAtOnce)}`);
  console.log(`floor   cold create -> ready (HTTP)                             ${summary(cold)}`);
  for (const f of floors) {
    console.log(`floor   runsc checkpoint --compression=${f.compression.padEnd(16)} ${summary(f.checkpoint)}   image ${mb(Math.min(...f.imageBytes))}-${mb(Math.max(...f.imageBytes))}`);
    console.log(`floor   runsc restore (${f.compression}) until exec answers ${' '.repeat(Math.max(0, 16 - f.compression.length))}${summary(f.restore)}`);
  }
  console.log(`disk held by a paused instance (after a 20 MB file): ${mb(held.allocated)} allocated (layer and saved memory), its files ${mb(held.apparent)} apparent (disk_mb ${profile.disk_mb})`);
  const ratio = (a: number[], b: number[]) => (p50(a) / p50(b)).toFixed(2);
  console.log(`\ntargets: pause / raw checkpoint ${ratio(paused, floor.checkpoint)} (<= 1.2); resume / raw restore ${ratio(resumed, floor.restore)} (<= 1.2); ` +
    `resume p50 ${p50(resumed).toFixed(0)} ms (<= 300); command on a paused instance p50 ${p50(firstCommand).toFixed(0)} ms (<= 400)`);
} catch (err) {
  // Said before the service closes, so that a failure of the close cannot hide it.
  console.error(err);
  process.exitCode = 1;
} finally {
  await bench.close();
}
