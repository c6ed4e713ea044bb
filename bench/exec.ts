// Commands and files through the HTTP API on one real instance, next to floors
// measured in the same run on the same instance without the service:
// - exec round trip of `true` vs `runsc exec ... true` (same flags, same namespace);
// (what files_changed costs with many files in the layer is bench/changes.ts, which
// takes its figures in turn, run by run, on a settled layer);
// - file reads of 1 KiB and 10 MiB (JSON and raw endpoints) vs `runsc exec cat`;
// - agent interfaces: the first output event of a streamed command vs the first byte of
//   `runsc exec`, and `true` through POST .../tools/call and the MCP endpoint (the
//   real SDK client) vs POST .../command.
//
//   npm run bench            (as root; ROOMKIT_BENCH_RUNS=20 by default)
import { spawn } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { join } from 'node:path';
import { run } from '../src/host/run.ts';
import { Runsc } from '../src/runtimes/gvisor/runsc.ts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { benchInstance, startBenchService } from './setup.ts';
import { percentile, summary, timed } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);

const bench = await startBenchService('10.217.1.0/24');
const { base, headers, dataDir } = bench;

try {
  const { roomUrl, id, netns } = await benchInstance(bench, 'bench-exec');

  const exec = async (command: string) => {
    const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers, body: JSON.stringify({ command }) });
    const body = (await res.json()) as { result?: { exit_code: number; files_changed_total: number } };
    if (res.status !== 200 || body.result?.exit_code !== 0) throw new Error(`${command} answered ${res.status}: ${JSON.stringify(body)}`);
    return body.result;
  };
  const rawExec = async (args: string[]) => {
    const result = await run(
      'nsenter',
      new Runsc({ root: join(dataDir, 'runsc') }).argv(netns, ['exec', '--user=1000:1000', id, ...args]).slice(1),
      { timeoutMs: 60_000, maxOutputBytes: 16 * 1024 * 1024 },
    );
    if (result.code !== 0) throw new Error(`runsc exec ${args.join(' ')}: ${result.stderr}`);
  };

  console.log(`roomkit commands and files benchmark, ${RUNS} runs each, one instance\n`);
  await exec('true'); // warm: the walker and the image's index
  const floorExec = await timed(RUNS, () => rawExec(['true']));
  const httpExec = await timed(RUNS, async () => void (await exec('true')));
  console.log(`floor   runsc exec true (same instance, no service)        ${summary(floorExec)}`);
  console.log(`roomkit POST .../command {"command":"true"} (HTTP)         ${summary(httpExec)}`);
  console.log(`        overhead over the floor at p50: ${(percentile(httpExec, 50) - percentile(floorExec, 50)).toFixed(0)} ms\n`);

  console.log('agent interfaces');
  const runscArgs = (args: string[]) => new Runsc({ root: join(dataDir, 'runsc') }).argv(netns, ['exec', '--user=1000:1000', id, ...args]).slice(1);
  const STREAMED = 'echo first; sleep 0.2; echo second';
  // Floor: from spawning runsc exec to the first byte of the command's output.
  const floorFirstByte = await timed(RUNS, () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn('nsenter', runscArgs(['sh', '-c', STREAMED]), { stdio: ['ignore', 'pipe', 'ignore'] });
      child.stdout.once('data', () => resolve());
      child.once('error', reject);
      child.stdout.resume();
    }),
  );
  const streamFirstOutput = await timed(RUNS, async () => {
    const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers: { ...headers, accept: 'text/event-stream' }, body: JSON.stringify({ command: STREAMED }) });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('event: output')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before any output');
      text += Buffer.from(value).toString();
    }
    await reader.cancel();
  });
  console.log(`floor   runsc exec: spawn to the first output byte          ${summary(floorFirstByte)}`);
  console.log(`roomkit streamed command: request to the first output event ${summary(streamFirstOutput)}`);
  const toolCall = await timed(RUNS, async () => {
    const res = await fetch(`${roomUrl}/tools/call`, { method: 'POST', headers, body: JSON.stringify({ name: 'run_command', arguments: { command: 'true' } }) });
    if (res.status !== 200) throw new Error(`tools/call answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  });
  console.log(`roomkit POST .../tools/call run_command true              ${summary(toolCall)}`);
  const mcp = new Client({ name: 'roomkit-bench', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: headers.authorization } } }));
  try {
    const mcpCall = await timed(RUNS, async () => {
      const result = await mcp.callTool({ name: 'run_command', arguments: { room: 'bench', profile: 'bench-exec', command: 'true' } });
      if (result.isError) throw new Error(`MCP run_command failed: ${JSON.stringify(result.content)}`);
    });
    console.log(`roomkit MCP tools/call run_command true (SDK client)      ${summary(mcpCall)}`);
    console.log(`        POST .../command true, for comparison              ${summary(httpExec)}\n`);
  } finally {
    await mcp.close();
  }

  console.log('\nfile reads');
  await exec('head -c 1024 /dev/urandom > one-k.bin && head -c 10485760 /dev/urandom > ten-m.bin');
  for (const [name, label] of [['one-k.bin', '1 KiB'], ['ten-m.bin', '10 MiB']] as const) {
    const floor = await timed(RUNS, () => rawExec(['cat', `/home/user/${name}`]));
    const json = await timed(RUNS, async () => {
      const res = await fetch(`${roomUrl}/file/${name}`, { headers });
      if (res.status !== 200) throw new Error(`read ${name}: ${res.status}`);
      await res.arrayBuffer();
    });
    const raw = await timed(RUNS, async () => {
      const res = await fetch(`${base}/vm/${id}/file/home/user/${name}`);
      if (res.status !== 200) throw new Error(`raw ${name}: ${res.status}`);
      await res.arrayBuffer();
    });
    console.log(`  ${label.padEnd(7)} floor runsc exec cat       ${summary(floor)}`);
    console.log(`  ${label.padEnd(7)} GET .../file/ (JSON)       ${summary(json)}`);
    console.log(`  ${label.padEnd(7)} GET /vm/.../file/ (raw)    ${summary(raw)}`);
  }
  const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
  const memory = (label: string) => {
    const m = process.memoryUsage();
    console.log(`${label}: RSS ${mib(m.rss)}, JS heap used ${mib(m.heapUsed)}, buffers ${mib(m.arrayBuffers)}`);
  };
  console.log('');
  // One process holds the service, its change worker's heap and this benchmark's own client
  // (bench/load.ts measures a service process of its own over time).
  memory('this process (service and benchmark client) after the run');
  // What the service holds, as opposed to garbage not yet collected.
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  memory('after a full garbage collection');
} finally {
  await bench.close();
}
