// Pause and resume through the HTTP API, of an idle instance holding a 100 MB working
// set (a background process with 100 MB of random data in its memory), and the disk a
// paused instance holds; beside floors measured in the same run: a cold create through
// the service (what a resume replaces), and raw `runsc checkpoint` + `runsc restore` of
// a sandbox of the same root filesystem with the same 100 MB process under
// `--network=none` (what keeping memory would cost; this runsc refuses to checkpoint the
// host-network sandboxes roomkit makes, see docs/architecture.md).
//
//   npm run bench:pause      (as root; ROOMKIT_BENCH_RUNS=10 by default)
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_HOST_TASKS_PER_INSTANCE } from '../src/config.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { mountDiskImage, mountOverlay, unmountAll } from '../src/host/mounts.ts';
import { run, runChecked } from '../src/host/run.ts';
import { ImageStore } from '../src/images/builder.ts';
import { ociSpec } from '../src/runtimes/gvisor/bundle.ts';
import { removeCgroups } from '../src/runtimes/gvisor/cgroups.ts';
import { startBenchService } from './setup.ts';
import { summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 10);
const WORKING_SET_MB = 100;
/** A background process holding WORKING_SET_MB of random data; its file is closed and removed, as a checkpoint needs. */
const HOLD_MEMORY =
  `head -c ${WORKING_SET_MB}M /dev/urandom > /tmp/ws.bin && ` +
  `(nohup perl -e 'open F, "/tmp/ws.bin"; local $/; $x = <F>; close F; unlink "/tmp/ws.bin"; sleep 100000' >/dev/null 2>&1 &) && ` +
  'while [ -e /tmp/ws.bin ]; do sleep 0.1; done';

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

/** Raw checkpoint/restore floor: the same image and bundle, `--network=none`, the same 100 MB process. */
async function rawCheckpointFloor(rootfs: string, runs: number) {
  const checkpoint: number[] = [];
  const restore: number[] = [];
  const imageBytes: number[] = [];
  const root = join(dataDir, 'floor');
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user', network: { egress: 'none' as const } };
  for (let i = 0; i < runs; i++) {
    const dir = join(root, `c${i}`);
    const id = `pause-floor-${process.pid}-${i}`;
    for (const d of ['layer', 'rootfs', 'bundle', 'image']) mkdirSync(join(dir, d), { recursive: true });
    const runsc = ['--root=' + join(root, 'runsc'), '--network=none', '--platform=ptrace'];
    try {
      await mountDiskImage(join(dir, 'disk.img'), join(dir, 'layer'), 1024);
      mkdirSync(join(dir, 'layer', 'upper'), { recursive: true });
      mkdirSync(join(dir, 'layer', 'work'), { recursive: true });
      await mountOverlay({ lower: rootfs, upper: join(dir, 'layer', 'upper'), work: join(dir, 'layer', 'work'), target: join(dir, 'rootfs') });
      writeFileSync(
        join(dir, 'bundle', 'config.json'),
        JSON.stringify(ociSpec({ instanceId: id, rootfs: join(dir, 'rootfs'), hostname: 'floor', spec, maxHostTasks: DEFAULT_HOST_TASKS_PER_INSTANCE })),
      );
      const fd = openSync(join(dir, 'console.log'), 'a');
      try {
        await runChecked('runsc', [...runsc, 'create', `--bundle=${join(dir, 'bundle')}`, id], { timeoutMs: 30_000, outputFd: fd });
      } finally {
        closeSync(fd);
      }
      await runChecked('runsc', [...runsc, 'start', id], { timeoutMs: 30_000 });
      await runChecked('runsc', [...runsc, 'exec', '--user=1000:1000', id, '/bin/sh', '-c', HOLD_MEMORY], { timeoutMs: 60_000 });
      let started = performance.now();
      await runChecked('runsc', [...runsc, 'checkpoint', `--image-path=${join(dir, 'image')}`, id], { timeoutMs: 120_000 });
      checkpoint.push(performance.now() - started);
      imageBytes.push(diskUse(join(dir, 'image')).allocated);
      await runChecked('runsc', [...runsc, 'delete', id], { timeoutMs: 30_000 });
      started = performance.now();
      // restore holds its stdio like create: a log file, not pipes.
      const log = openSync(join(dir, 'restore.log'), 'a');
      const child = spawn('runsc', [...runsc, 'restore', `--image-path=${join(dir, 'image')}`, `--bundle=${join(dir, 'bundle')}`, '--detach', id], { stdio: ['ignore', log, log] });
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      closeSync(log);
      if (code !== 0) throw new Error(`runsc restore exited with ${code}`);
      // Restored when the process holding the working set answers again.
      await runChecked('runsc', [...runsc, 'exec', '--user=1000:1000', id, 'pgrep', '-x', 'perl'], { timeoutMs: 30_000 });
      restore.push(performance.now() - started);
    } finally {
      await run('runsc', [...runsc, 'delete', '--force', id], { timeoutMs: 30_000 });
      await unmountAll(dir);
      removeCgroups(id);
      rmSync(dir, { recursive: true, force: true });
    }
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

  // Pause and resume of one instance, with the working set made again before each pause.
  const roomUrl = `${base}/api/profile/${profile.profile_id}/room/bench`;
  const instance = await post(roomUrl, 201);
  await command(roomUrl, 'head -c 20M /dev/urandom > work.bin');
  const paused: number[] = [];
  const resumed: number[] = [];
  const firstCommand: number[] = [];
  let held = { allocated: 0, apparent: 0 };
  let memoryKept: boolean | undefined;
  for (let i = 0; i < RUNS; i++) {
    await command(roomUrl, HOLD_MEMORY);
    let started = performance.now();
    const body = await post(`${roomUrl}/pause`, 200);
    paused.push(performance.now() - started);
    memoryKept = body.pause?.memory_kept;
    held = diskUse(join(dataDir, 'instances', instance.instance_id));
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
  }
  await fetch(roomUrl, { method: 'DELETE', headers });

  const images = new ImageStore({ dir: config.imagesDir, log });
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });
  const floor = await rawCheckpointFloor(image.rootfs, RUNS);

  console.log(`roomkit POST …/pause -> paused (HTTP), memory_kept: ${memoryKept}       ${summary(paused)}`);
  console.log(`roomkit POST …/resume -> ready (HTTP)                           ${summary(resumed)}`);
  console.log(`roomkit command on a paused instance (resume + \`true\`)          ${summary(firstCommand)}`);
  console.log(`floor   cold create -> ready (HTTP)                             ${summary(cold)}`);
  console.log(`floor   runsc checkpoint, --network=none, ${WORKING_SET_MB} MB process         ${summary(floor.checkpoint)}`);
  console.log(`floor   runsc restore until the process answers                 ${summary(floor.restore)}`);
  console.log(`disk held by a paused instance (after a 20 MB file): ${mb(held.allocated)} allocated, its layer file ${mb(held.apparent)} apparent (disk_mb ${profile.disk_mb})`);
  console.log(`checkpoint image of the floor: ${mb(Math.min(...floor.imageBytes))}-${mb(Math.max(...floor.imageBytes))}`);
} finally {
  await bench.close();
}
