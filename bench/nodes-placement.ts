// Three nodes on one PostgreSQL store, each a `roomkit serve` process of its own (real
// gVisor instances, its own data directory and network range, one image cache shared):
//  1. placement: 20 creates sent at once, spread over the three nodes' addresses; what
//     each decision took (the answer's Server-Timing), where the instances went, and
//     that no room got two instances (also 5 creates of one room at once, one per node
//     and more). The floor beside it: a create of the same profile on one node alone.
//  2. failover: a node holding an instance is killed (SIGKILL, its whole process
//     group); how long until another node records its instance `lost` (target: p50 at
//     most 15 s with the default ROOMKIT_NODE_HEARTBEAT_MS 2000 and
//     ROOMKIT_NODE_LOST_AFTER_MS 10000), over ROOMKIT_BENCH_FAILOVERS runs (5).
//
//   node bench/nodes-placement.ts   (as root; ROOMKIT_IMAGES_DIR to reuse built images)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type BenchServiceProcess, startBenchServiceProcess } from './setup.ts';
import { startScratchPostgres } from './scratch-postgres.ts';
import { percentile, summary } from './stats.ts';

const CREATES = 20;
const FAILOVERS = Number(process.env.ROOMKIT_BENCH_FAILOVERS ?? 5);
const SECRET = 'bench-node-secret-0123456789abcdef0123';
const POOLS = ['10.217.10.0/26', '10.217.10.64/26', '10.217.10.128/26', '10.217.10.192/26'];

const imagesDir = process.env.ROOMKIT_IMAGES_DIR ?? mkdtempSync(join(tmpdir(), 'roomkit-bench-images-'));
const postgres = await startScratchPostgres();
// The organization's quotas (16 vCPUs by default) are raised past what the benchmark makes.
const env = {
  ROOMKIT_DATABASE_URL: postgres.url,
  ROOMKIT_NODE_SECRET: SECRET,
  ROOMKIT_IMAGES_DIR: imagesDir,
  ROOMKIT_QUOTA_INSTANCES: '100',
  ROOMKIT_QUOTA_VCPUS: '100',
  ROOMKIT_QUOTA_MEMORY_MB: '65536',
  ROOMKIT_QUOTA_DISK_MB: '1000000',
};
const nodes: (BenchServiceProcess & { id?: string; pool?: string })[] = [];
let headers: Record<string, string> = {};

async function api(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any; node: string | null; timing: number | undefined }> {
  const res = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  const timing = /placement;dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '')?.[1];
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text), node: res.headers.get('x-roomkit-node'), timing: timing === undefined ? undefined : Number(timing) };
}

async function startNode(): Promise<BenchServiceProcess & { id: string }> {
  // Address ranges are a host's: a live node's is never given to another.
  const pool = POOLS.find((p) => !nodes.some((n) => n.pool === p));
  if (pool === undefined) throw new Error('no address range left for another node');
  const node = Object.assign(await startBenchServiceProcess(pool, env), { pool });
  nodes.push(node);
  if (Object.keys(headers).length === 0) headers = node.headers; // The first start made the organization and its key.
  const health = await fetch(`${node.base}/api/profiles`, { headers });
  return Object.assign(node, { id: health.headers.get('x-roomkit-node') ?? '' });
}

async function profile(name: string): Promise<string> {
  const made = await api(nodes[0]!.base, 'POST', '/api/profiles', { name, memory_mb: 256, network: { egress: 'none' } });
  if (made.status !== 201) throw new Error(`profile: ${made.status} ${JSON.stringify(made.json)}`);
  return made.json.profile_id as string;
}

try {
  const first = await startNode();
  // The image is built once, by the first node, before the others start.
  const floorProfile = await profile('bench-floor');
  const floors: number[] = [];
  for (let i = 0; i < 4; i++) {
    const started = performance.now();
    const made = await api(first.base, 'POST', `/api/profile/${floorProfile}/room/floor-${i}`, {});
    if (made.status !== 201) throw new Error(`create: ${made.status} ${JSON.stringify(made.json)}`);
    if (i > 0) floors.push(performance.now() - started); // the first one built the image
    await api(first.base, 'DELETE', `/api/profile/${floorProfile}/room/floor-${i}`);
  }
  const others = [await startNode(), await startNode()];
  const all = [first, ...others];

  // 1. Placement.
  const placed = await profile('bench-placement');
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: CREATES }, (_, i) => api(all[i % all.length]!.base, 'POST', `/api/profile/${placed}/room/r-${i}`, {})),
  );
  const wall = performance.now() - started;
  const failed = answers.filter((a) => a.status !== 201);
  if (failed.length > 0) throw new Error(`${failed.length} creates failed, e.g. ${failed[0]!.status} ${JSON.stringify(failed[0]!.json)}`);
  const decisions = answers.map((a) => a.timing).filter((t): t is number => t !== undefined);
  const byNode = new Map<string, number>();
  for (const a of answers) byNode.set(a.node ?? '?', (byNode.get(a.node ?? '?') ?? 0) + 1);
  // One room, five creates at once through the three nodes: one instance.
  const racing = await Promise.all(Array.from({ length: 5 }, (_, i) => api(all[i % all.length]!.base, 'POST', `/api/profile/${placed}/room/raced`, {})));
  const racedIds = new Set(racing.filter((a) => a.status === 201 || a.status === 200).map((a) => a.json.instance_id));
  const listed = await api(first.base, 'GET', `/api/instances?profile_id=${placed}&limit=100`);
  const rooms = new Map<string, number>();
  for (const i of (listed.json?.instances ?? []) as { room_id: string; state: string }[]) if (!['stopped', 'failed', 'lost'].includes(i.state)) rooms.set(i.room_id, (rooms.get(i.room_id) ?? 0) + 1);
  const doubled = [...rooms.values()].filter((n) => n > 1).length;

  console.log(`roomkit placement benchmark: 3 nodes (processes) on one PostgreSQL store, ${CREATES} creates at once\n`);
  console.log(`floor   create of the profile on one node alone (warm image)            ${summary(floors)}`);
  console.log(`roomkit placement decision (Server-Timing), ${decisions.length} creates          ${summary(decisions)}   p99 ${percentile(decisions, 99).toFixed(0)} ms`);
  console.log(`        ${CREATES} creates at once: all ready in ${(wall / 1000).toFixed(1)} s; per node: ${[...byNode.entries()].map(([n, c]) => `${n.slice(0, 8)} ${c}`).join(', ')}`);
  console.log('        (a node that ran the profile is preferred among nodes alike in memory: its image is there; here all share one image cache)');
  console.log(`        one room created 5 times at once through 3 nodes: ${racedIds.size} instance(s); rooms with two live instances: ${doubled} (target 0)`);
  for (let i = 0; i < CREATES; i++) await api(first.base, 'DELETE', `/api/profile/${placed}/room/r-${i}`);
  await api(first.base, 'DELETE', `/api/profile/${placed}/room/raced`);

  // 2. Failover: a node with an instance is killed; another records the instance lost.
  const toLost: number[] = [];
  for (let run = 0; run < FAILOVERS; run++) {
    // A new node joins each run, so that three stay after the kill. The instance goes
    // where placement puts it; the node killed is the one that runs it (not the first,
    // through which the benchmark watches: then another room is tried).
    await startNode();
    const own = await profile(`bench-failover-${run}`);
    let victim: (BenchServiceProcess & { id: string }) | undefined;
    let roomName = '';
    for (let attempt = 0; victim === undefined; attempt++) {
      if (attempt === 10) throw new Error('10 creates in a row were placed on the first node');
      roomName = `victim-${attempt}`;
      const made = await api(nodes[0]!.base, 'POST', `/api/profile/${own}/room/${roomName}`, {});
      if (made.status !== 201) throw new Error(`create: ${made.status} ${JSON.stringify(made.json)}`);
      victim = (nodes as (BenchServiceProcess & { id: string })[]).find((n, i) => i > 0 && n.id === made.node);
    }
    await sleep(2_500); // at least one heartbeat after the create
    const killedAt = performance.now();
    process.kill(-victim.pid, 'SIGKILL');
    for (;;) {
      const seen = await api(nodes[0]!.base, 'GET', `/api/profile/${own}/room/${roomName}`);
      if (seen.json?.state === 'lost') break;
      if (performance.now() - killedAt > 60_000) throw new Error('not recorded lost within 60 s');
      await sleep(100);
    }
    toLost.push(performance.now() - killedAt);
    // What the killed node left on this host goes with its data directory (close()).
    await victim.close();
    nodes.splice(nodes.indexOf(victim), 1);
  }
  console.log(`\nfailover: SIGKILL of a node to its instance recorded \`lost\` by another, ${FAILOVERS} runs`);
  console.log(`roomkit kill -> lost (heartbeat 2 s, lost after 10 s)                      ${summary(toLost)}`);
  console.log('        target: p50 at most 15 s');
} finally {
  for (const node of nodes.reverse()) await node.close().catch((err: unknown) => console.error(`close: ${String(err)}`));
  await postgres.stop();
  if (process.env.ROOMKIT_IMAGES_DIR === undefined) rmSync(imagesDir, { recursive: true, force: true });
}
