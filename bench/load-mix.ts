// The traffic of the load benchmark: kinds of requests with their share of the mix,
// each with its floor, the same work without the service: `runsc exec` of the same
// program in the same instance as the VM user (commands, file reads, writes, listings),
// or `GET /healthz` for requests that do no work in an instance (the HTTP round trip).
import { VM_UID } from '../src/images/builder.ts';
import { PATH_ENV } from '../src/runtimes/agent/commands.ts';
import { CAPABILITIES } from '../src/runtimes/gvisor/bundle.ts';
import { Runsc } from '../src/runtimes/gvisor/runsc.ts';

export const HOME = '/home/user';
/** Written once per instance before the load; the reads read it. */
export const READ_FILE = 'work/read.txt';
export const READ_FILE_TEXT = 'roomkit load benchmark line of text\n'.repeat(455); // 16,380 bytes
const WRITE_BYTES = 4096;
/** Writes cycle over this many names per instance, so the writable layer stays the same size. */
const NAMES = 32;

export interface Target {
  instanceId: string;
  /** …/api/profile/{p}/room/{r} */
  roomUrl: string;
  /** The instance's network namespace, for the floor's runsc exec. */
  netns: string;
}

export interface Context {
  base: string;
  headers: Record<string, string>;
  runsc: Runsc;
  signal: AbortSignal;
}

/** What one request got: its status, and the error code (or what was wrong) when it failed. */
export interface Outcome {
  status: number;
  error?: string;
}

export interface Kind {
  name: string;
  weight: number;
  /** One request of this kind through the service; `n` makes names differ. */
  service(ctx: Context, target: Target, n: number): Promise<Outcome>;
  /** The same work without the service. */
  floor(ctx: Context, target: Target, n: number): Promise<Outcome>;
  floorLabel: string;
}

async function answer(res: Response, check?: (body: unknown) => string | undefined): Promise<Outcome> {
  const text = await res.text();
  if (res.status >= 400) {
    let code = 'no error code';
    try {
      code = (JSON.parse(text) as { error?: string }).error ?? code;
    } catch {
      // not the Error body; the status says enough
    }
    return { status: res.status, error: code };
  }
  const wrong = check?.(text.startsWith('{') ? JSON.parse(text) : text);
  return wrong === undefined ? { status: res.status } : { status: res.status, error: wrong };
}

const request = (ctx: Context, url: string, init: RequestInit = {}) =>
  fetch(url, { ...init, headers: { ...ctx.headers, ...(init.headers as Record<string, string> | undefined) }, signal: ctx.signal });

function command(ctx: Context, target: Target, text: string): Promise<Outcome> {
  return request(ctx, `${target.roomUrl}/command`, { method: 'POST', body: JSON.stringify({ command: text }) }).then((res) =>
    answer(res, (body) => {
      const exit = (body as { result?: { exit_code?: number } }).result?.exit_code;
      return exit === 0 ? undefined : `exit_code ${exit}`;
    }),
  );
}

/**
 * The `runsc exec` arguments that run argv in the instance as the VM user in its home,
 * with the sandbox's capabilities, which env(1) drops (an execve by a non-root user).
 */
function floorExecArgs(instanceId: string, argv: string[]): string[] {
  const identity = [`--user=${VM_UID}:${VM_UID}`, `--cwd=${HOME}`, `--env=HOME=${HOME}`, `--env=${PATH_ENV}`];
  return ['exec', ...identity, ...CAPABILITIES.map((c) => `--cap=${c}`), instanceId, '/usr/bin/env', '--', ...argv];
}

/** `runsc exec` of argv in the instance as the VM user, the work without the service and its agent; stdin gets `input`. */
export function runscExec(ctx: Context, target: Target, argv: string[], input?: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = ctx.runsc.spawn(target.netns, floorExecArgs(target.instanceId, argv));
    let stderr = '';
    child.stdout.resume();
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.on('error', () => {});
    child.stdin.end(input);
    child.once('error', (err) => resolve({ status: 0, error: `spawn: ${err.message}` }));
    child.once('close', (code) => resolve(code === 0 ? { status: 0 } : { status: 0, error: `runsc exec exit ${code}: ${stderr.trim().split('\n').at(-1) ?? ''}` }));
  });
}

const healthz = (ctx: Context) => request(ctx, `${ctx.base}/healthz`).then((res) => answer(res));

const cmdOutput = 'seq 1 2000';
const cmdWrite = (n: number) => `head -c ${WRITE_BYTES} /dev/urandom > work/cmd-${n % NAMES}.bin`;
const bytes = (n: number) => Buffer.alloc(WRITE_BYTES, n % 251);

export const KINDS: Kind[] = [
  {
    name: 'command: true',
    weight: 12,
    service: (ctx, t) => command(ctx, t, 'true'),
    floor: (ctx, t) => runscExec(ctx, t, ['sh', '-c', 'true']),
    floorLabel: 'runsc exec sh -c true',
  },
  {
    name: `command: ${cmdOutput} (9 KB out)`,
    weight: 10,
    service: (ctx, t) => command(ctx, t, cmdOutput),
    floor: (ctx, t) => runscExec(ctx, t, ['sh', '-c', cmdOutput]),
    floorLabel: 'runsc exec sh -c "seq …"',
  },
  {
    name: 'command: writes a 4 KiB file',
    weight: 10,
    service: (ctx, t, n) => command(ctx, t, cmdWrite(n)),
    floor: (ctx, t, n) => runscExec(ctx, t, ['sh', '-c', cmdWrite(n)]),
    floorLabel: 'runsc exec sh -c "head … > …"',
  },
  {
    name: 'read file (JSON, 16 KB)',
    weight: 12,
    service: (ctx, t) =>
      request(ctx, `${t.roomUrl}/file/${READ_FILE}`).then((res) =>
        answer(res, (body) => ((body as { content?: string }).content === READ_FILE_TEXT ? undefined : 'wrong content')),
      ),
    floor: (ctx, t) => runscExec(ctx, t, ['cat', `${HOME}/${READ_FILE}`]),
    floorLabel: 'runsc exec cat',
  },
  {
    name: 'read file (raw /vm/…, 16 KB)',
    weight: 10,
    service: (ctx, t) =>
      fetch(`${ctx.base}/vm/${t.instanceId}/file${HOME}/${READ_FILE}`, { signal: ctx.signal }).then((res) =>
        answer(res, (body) => (body === READ_FILE_TEXT ? undefined : 'wrong content')),
      ),
    floor: (ctx, t) => runscExec(ctx, t, ['cat', `${HOME}/${READ_FILE}`]),
    floorLabel: 'runsc exec cat',
  },
  {
    name: 'write file (raw PUT, 4 KiB)',
    weight: 8,
    service: (ctx, t, n) =>
      request(ctx, `${t.roomUrl}/file/work/put-${n % NAMES}.bin`, { method: 'PUT', body: bytes(n), headers: { 'content-type': 'application/octet-stream' } }).then((res) =>
        answer(res),
      ),
    floor: (ctx, t, n) => runscExec(ctx, t, ['sh', '-c', `cat > ${HOME}/work/floor-${n % NAMES}.bin`], bytes(n)),
    floorLabel: 'runsc exec sh -c "cat > …"',
  },
  {
    name: 'write file (JSON PUT, 4 KiB)',
    weight: 8,
    service: (ctx, t, n) =>
      request(ctx, `${t.roomUrl}/file/work/put-${n % NAMES}.txt`, { method: 'PUT', body: JSON.stringify({ content: 'x'.repeat(WRITE_BYTES) }) }).then((res) =>
        answer(res),
      ),
    floor: (ctx, t, n) => runscExec(ctx, t, ['sh', '-c', `cat > ${HOME}/work/floor-${n % NAMES}.txt`], Buffer.from('x'.repeat(WRITE_BYTES))),
    floorLabel: 'runsc exec sh -c "cat > …"',
  },
  {
    name: 'list files (?path=work)',
    weight: 8,
    service: (ctx, t) => request(ctx, `${t.roomUrl}/files?path=work`).then((res) => answer(res)),
    floor: (ctx, t) => runscExec(ctx, t, ['ls', '-la', `${HOME}/work`]),
    floorLabel: 'runsc exec ls -la',
  },
  {
    name: 'get instance',
    weight: 14,
    service: (ctx, t) =>
      request(ctx, t.roomUrl).then((res) => answer(res, (body) => ((body as { state?: string }).state === 'ready' ? undefined : 'not ready'))),
    floor: (ctx) => healthz(ctx),
    floorLabel: 'GET /healthz',
  },
  {
    name: 'list instances',
    weight: 8,
    service: (ctx) => request(ctx, `${ctx.base}/api/instances?limit=50`).then((res) => answer(res)),
    floor: (ctx) => healthz(ctx),
    floorLabel: 'GET /healthz',
  },
];

/** A small seeded generator (mulberry32), so that a run's mix can be repeated. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks a kind by its weight. */
export function pick(next: () => number): Kind {
  const total = KINDS.reduce((sum, k) => sum + k.weight, 0);
  let r = next() * total;
  for (const kind of KINDS) {
    r -= kind.weight;
    if (r < 0) return kind;
  }
  return KINDS[KINDS.length - 1]!;
}
