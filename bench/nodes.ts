// Two nodes on one PostgreSQL store (each a real roomkit service with the gVisor
// runtime, its own data directory and network range, on loopback): a command sent to
// the node that does not run the instance is forwarded to the one that does. Measured
// in turn, run by run, on the same instance: `true` through the owner (the floor) and
// through the other node; the target is at most 2 ms more at p50.
//
//   node bench/nodes.ts      (as root; ROOMKIT_BENCH_RUNS=30 by default; a scratch
//                             PostgreSQL cluster of Debian's server is made and removed)
import { startBenchService } from './setup.ts';
import { startScratchPostgres } from './scratch-postgres.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 30);
const SECRET = 'bench-node-secret-0123456789abcdef0123';

const postgres = await startScratchPostgres();
const settings = { databaseUrl: postgres.url, nodeSecret: SECRET };
const owner = await startBenchService('10.217.9.0/25', settings);
const other = await startBenchService('10.217.9.128/25', settings);
try {
  await owner.services.nodes!.join(owner.base);
  await other.services.nodes!.join(other.base);
  const profile = (await (
    await fetch(`${owner.base}/api/profiles`, { method: 'POST', headers: owner.headers, body: JSON.stringify({ name: 'bench-nodes', network: { egress: 'none' } }) })
  ).json()) as { profile_id: string };
  const path = `/api/profile/${profile.profile_id}/room/bench`;
  const created = (await (await fetch(`${owner.base}${path}`, { method: 'POST', headers: owner.headers, body: '{}' })).json()) as { state: string };
  if (created.state !== 'ready') throw new Error(`the instance did not start: ${JSON.stringify(created)}`);

  const exec = async (base: string): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${base}${path}/command`, { method: 'POST', headers: owner.headers, body: JSON.stringify({ command: 'true' }) });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`answered ${res.status}`);
    return performance.now() - started;
  };
  // Warm both paths: the agent connection, the nodes' kept-open connection.
  for (let i = 0; i < 3; i++) {
    await exec(owner.base);
    await exec(other.base);
  }
  const direct: number[] = [];
  const forwarded: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    direct.push(await exec(owner.base));
    forwarded.push(await exec(other.base));
  }
  console.log(`roomkit nodes benchmark: a command on an instance of node A, ${RUNS} runs each, in turn\n`);
  console.log(`floor   POST .../command "true" to node A (the owner)            ${summary(direct)}`);
  console.log(`roomkit POST .../command "true" to node B (forwarded to A)       ${summary(forwarded)}`);
  const overhead = percentile(forwarded, 50) - percentile(direct, 50);
  console.log(`        forwarding overhead at p50: ${overhead.toFixed(2)} ms (target: at most 2 ms)`);
} finally {
  await other.close();
  await owner.close();
  await postgres.stop();
}
