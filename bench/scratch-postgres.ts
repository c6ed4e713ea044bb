// A throwaway PostgreSQL cluster for a benchmark that needs several nodes on one store:
// Debian's server on a scratch data directory and a free loopback port, run as the
// `postgres` user when this runs as root (the server refuses root), without fsync
// (durability is not what is measured), removed by stop(). As scripts/test makes its own.
// Also the store of test/host/nodes.test.ts, whose nodes reach it from network
// namespaces of their own: `host` is the address it listens on (127.0.0.1 by default)
// and `clients` the addresses it lets in besides the local ones.
import { appendFileSync, chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../src/host/run.ts';

export interface ScratchPostgres {
  /** The URL of its `roomkit` database. */
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startScratchPostgres(options: { host?: string; clients?: string } = {}): Promise<ScratchPostgres> {
  const host = options.host ?? '127.0.0.1';
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b));
  const bin = `/usr/lib/postgresql/${versions.at(-1)}/bin`;
  const dir = mkdtempSync(join(tmpdir(), 'roomkit-bench-postgres-'));
  const asUser = (program: string, args: string[]) => (process.getuid?.() === 0 ? run('runuser', ['-u', 'postgres', '--', program, ...args], { timeoutMs: 120_000 }) : run(program, args, { timeoutMs: 120_000 }));
  if (process.getuid?.() === 0) {
    const id = await run('id', ['-u', 'postgres'], { timeoutMs: 10_000 });
    const gid = await run('id', ['-g', 'postgres'], { timeoutMs: 10_000 });
    chownSync(dir, Number(id.stdout.trim()), Number(gid.stdout.trim()));
  }
  const data = join(dir, 'data');
  const init = await asUser(`${bin}/initdb`, ['-D', data, '-U', 'roomkit', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync']);
  if (init.code !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  if (options.clients !== undefined) appendFileSync(join(data, 'pg_hba.conf'), `host all all ${options.clients} trust\n`);
  const port = await freePort();
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=${host} -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const started = await asUser(`${bin}/pg_ctl`, ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', serverOptions, 'start']);
  if (started.code !== 0) throw new Error(`the PostgreSQL server did not start: ${started.stderr}`);
  const created = await run(`${bin}/psql`, ['-h', host, '-p', String(port), '-U', 'roomkit', '-d', 'postgres', '-c', 'CREATE DATABASE roomkit'], { timeoutMs: 60_000 });
  if (created.code !== 0) throw new Error(`could not make the database: ${created.stderr}`);
  return {
    url: `postgres://roomkit@${host}:${port}/roomkit`,
    async stop() {
      await asUser(`${bin}/pg_ctl`, ['-D', data, '-m', 'immediate', 'stop']);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
