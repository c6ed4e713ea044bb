// What undo of one command costs, on one instance of a profile with keep_undo (a btrfs
// writable layer), each figure beside its floor in the same run:
// - a command that changes nothing (`true`) with keep_undo, beside the same command
//   with "keep_undo": false (the overhead of taking and bounding an undo point);
// - a command that changes 100 files (50 created, 50 rewritten), with and without keep_undo;
// - the revert of such a command (its 100 files put back through the guest).
//
//   npm run bench:undo      (as root; ROOMKIT_BENCH_RUNS=20 by default; ROOMKIT_IMAGES_DIR
//                            to reuse an image cache)
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchService } from './setup.ts';
import { summary, timed } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);
const revertOnly: number[] = [];
const HUNDRED_FILES = 'mkdir -p many && i=0; while [ $i -lt 50 ]; do echo "$RANDOM $i" > many/new-$RANDOM-$i; echo "$RANDOM" > many/kept-$i; i=$((i+1)); done';

const imagesDir = process.env.ROOMKIT_IMAGES_DIR ?? mkdtempSync(join(tmpdir(), 'roomkit-bench-images-'));
const bench = await startBenchService('10.248.0.0/24', { imagesDir });
try {
  const { base, headers } = bench;
  const profileRes = await fetch(`${base}/api/profiles`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'undo', keep_undo: true, disk_mb: 2048, network: { egress: 'none' }, command_timeout_s: 600 }),
  });
  const profile = (await profileRes.json()) as { profile_id: string };
  const roomUrl = `${base}/api/profile/${profile.profile_id}/room/bench`;
  const created = await fetch(roomUrl, { method: 'POST', headers, body: '{}' });
  const instance = (await created.json()) as { state: string };
  if (instance.state !== 'ready') throw new Error(`the instance did not start: ${JSON.stringify(instance)}`);

  const command = async (text: string, keepUndo: boolean) => {
    const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers, body: JSON.stringify({ command: text, keep_undo: keepUndo }) });
    const body = (await res.json()) as { command_id: string; result: { exit_code: number; files_changed_total: number } };
    if (res.status !== 200 || body.result.exit_code !== 0) throw new Error(`command failed: ${JSON.stringify(body)}`);
    return body;
  };
  // Warm up (the image's index, the agent's first connections).
  await command('true', false);
  await command(HUNDRED_FILES, false);

  const nothing = await timed(RUNS, async () => void (await command('true', false)));
  const nothingUndo = await timed(RUNS, async () => void (await command('true', true)));
  const hundred = await timed(RUNS, async () => void (await command(HUNDRED_FILES, false)));
  const hundredUndo = await timed(RUNS, async () => void (await command(HUNDRED_FILES, true)));
  let changed = 0;
  let reverted = 0;
  await timed(RUNS, async () => {
    const ran = await command(HUNDRED_FILES, true);
    changed = ran.result.files_changed_total;
    const started = performance.now();
    const res = await fetch(`${roomUrl}/commands/${ran.command_id}/revert`, { method: 'POST', headers, body: '{}' });
    const body = (await res.json()) as { files_changed_total: number };
    if (res.status !== 200) throw new Error(`revert failed: ${JSON.stringify(body)}`);
    reverted = body.files_changed_total;
    // timed() measures the command too: keep only the revert.
    revertOnly.push(performance.now() - started);
  });

  console.log(`undo of one command, ${RUNS} runs each, one instance (btrfs layer)`);
  console.log(`  true, keep_undo false (floor)       ${summary(nothing)}`);
  console.log(`  true, keep_undo true                ${summary(nothingUndo)}`);
  console.log(`  100 files, keep_undo false (floor)  ${summary(hundred)}`);
  console.log(`  100 files, keep_undo true           ${summary(hundredUndo)}`);
  console.log(`  revert of a command that changed ${changed} files (${reverted} put back)  ${summary(revertOnly)}`);
} finally {
  await bench.close();
}
