// TCP between the host and an instance, on gVisor's own network stack (what instances
// run on) and on the host's stack in the namespace (runsc's `--network=host`, what they
// ran on before), in the same run: request/response round trips (64 bytes each way,
// one connection) and bulk transfers both ways, from a client on the host to a small
// server inside the sandbox (python3, which the default image has), over the
// namespace's veth as ports and the agent use it.
//
//   npm run bench:tcp   (as root; ROOMKIT_BENCH_RUNS=3 rounds by default,
//                        ROOMKIT_BENCH_ROUND_TRIPS=2000, ROOMKIT_BENCH_BULK_MB=64;
//                        ROOMKIT_IMAGES_DIR for a cache of images already built)
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/config.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import { createLogger } from '../src/log.ts';
import { withRawSandbox } from './raw-sandbox.ts';
import { percentile } from './stats.ts';

const ROUNDS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 3);
const ROUND_TRIPS = Number(process.env.ROOMKIT_BENCH_ROUND_TRIPS ?? 2000);
const BULK_BYTES = Number(process.env.ROOMKIT_BENCH_BULK_MB ?? 64) * 1024 * 1024;
const PORT = 7000;
/** One /30 of its own, outside the pools the service and the other benchmarks use. */
const LEASE = { slot: 0, hostAddress: '10.219.251.1', guestAddress: '10.219.251.2', prefixLength: 30 as const };
const NETWORKS = ['sandbox', 'host'] as const;

// The server inside: the first byte of a connection says what it wants. `e`: echo 64-byte
// messages until the client closes; `u`: read to the end, answer the byte count; `d`:
// send the number of bytes the next 8 give, then close.
const SERVER = `
import socket, struct, threading
def serve(c):
    with c:
        kind = c.recv(1)
        if kind == b'e':
            while True:
                m = c.recv(64, socket.MSG_WAITALL)
                if not m: return
                c.sendall(m)
        elif kind == b'u':
            n = 0
            while True:
                b = c.recv(1 << 20)
                if not b: break
                n += len(b)
            c.sendall(struct.pack('>Q', n))
        elif kind == b'd':
            n = struct.unpack('>Q', c.recv(8, socket.MSG_WAITALL))[0]
            chunk = b'x' * (1 << 20)
            while n > 0:
                c.sendall(chunk[:min(n, len(chunk))])
                n -= min(n, len(chunk))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', ${PORT}))
s.listen(16)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

function open(kind: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: LEASE.guestAddress, port: PORT, noDelay: true }, () => {
      socket.write(kind);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Milliseconds of each of ROUND_TRIPS request/response exchanges on one connection. */
async function roundTrips(): Promise<number[]> {
  const socket = await open('e');
  const message = Buffer.alloc(64, 'r');
  const times: number[] = [];
  let pending = 0;
  let done: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    pending -= chunk.length;
    if (pending <= 0) done?.();
  });
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const started = performance.now();
    pending = message.length;
    await new Promise<void>((resolve) => {
      done = resolve;
      socket.write(message);
    });
    times.push(performance.now() - started);
  }
  socket.destroy();
  return times;
}

/** MB/s of BULK_BYTES sent from the host to the guest, counted as received by the guest. */
async function upload(): Promise<number> {
  const socket = await open('u');
  const chunk = Buffer.alloc(1 << 20, 'u');
  const started = performance.now();
  const answer = new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    socket.on('data', (b: Buffer) => parts.push(b));
    socket.on('end', () => resolve(Buffer.concat(parts)));
    socket.on('error', reject);
  });
  for (let sent = 0; sent < BULK_BYTES; sent += chunk.length) {
    if (!socket.write(chunk)) await new Promise((r) => socket.once('drain', r));
  }
  socket.end();
  const counted = Number((await answer).readBigUInt64BE(0));
  if (counted !== BULK_BYTES) throw new Error(`the guest received ${counted} of ${BULK_BYTES} bytes`);
  return BULK_BYTES / 1e6 / ((performance.now() - started) / 1000);
}

/** MB/s of BULK_BYTES sent from the guest to the host. */
async function download(): Promise<number> {
  const socket = await open('d');
  const size = Buffer.alloc(8);
  size.writeBigUInt64BE(BigInt(BULK_BYTES));
  const started = performance.now();
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    socket.on('data', (b: Buffer) => void (received += b.length));
    socket.on('end', resolve);
    socket.on('error', reject);
    socket.write(size);
  });
  if (received !== BULK_BYTES) throw new Error(`received ${received} of ${BULK_BYTES} bytes`);
  return BULK_BYTES / 1e6 / ((performance.now() - started) / 1000);
}

async function untilListening(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      (await open('e')).destroy();
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error(`the server inside does not listen on ${LEASE.guestAddress}:${PORT}`);
}

const log = createLogger('warn');
const config = loadConfig({ logLevel: 'warn' });
const images = new ImageStore({ dir: config.imagesDir, log });
const image = await images.ensure({ image: PROFILE_DEFAULTS.image, packages: [], user: PROFILE_DEFAULTS.user, home: '/home/user' });
const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };
const floorDir = mkdtempSync(join(tmpdir(), 'roomkit-bench-tcp-'));
const figures = Object.fromEntries(NETWORKS.map((n) => [n, { rtt: [] as number[], up: [] as number[], down: [] as number[] }]));

try {
  console.log(`TCP host ↔ instance, ${ROUNDS} rounds (interleaved), ${ROUND_TRIPS} round trips of 64 bytes, ${BULK_BYTES / 1024 / 1024} MiB each way\n`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const network of NETWORKS) {
      const f = figures[network]!;
      await withRawSandbox(
        floorDir,
        `t${network.slice(0, 1)}${round}`,
        image,
        spec,
        async (sandbox) => {
          await sandbox.start();
          // Started by a shell that leaves it running (the sandbox's init adopts it).
          await sandbox.runsc(['exec', '--user=1000:1000', sandbox.id, 'sh', '-c', 'nohup python3 -c "$1" >/dev/null 2>&1 &', 'sh', SERVER]);
          await untilListening();
          f.rtt.push(...(await roundTrips()));
          f.up.push(await upload());
          f.down.push(await download());
        },
        { network, lease: LEASE },
      );
    }
  }
  const mbps = (v: number[]) => percentile(v, 50).toFixed(0).padStart(6);
  console.log('network stack                round trip p50 / p99        host → guest     guest → host');
  for (const network of NETWORKS) {
    const f = figures[network]!;
    const label = network === 'sandbox' ? "gVisor's (--network=sandbox)" : "host's (--network=host)";
    console.log(
      `${label.padEnd(28)} ${percentile(f.rtt, 50).toFixed(3)} / ${percentile(f.rtt, 99).toFixed(3)} ms       ${mbps(f.up)} MB/s      ${mbps(f.down)} MB/s`,
    );
  }
  console.log('\n(bulk: p50 of the rounds)');
} finally {
  await images.close();
  rmSync(floorDir, { recursive: true, force: true });
}
