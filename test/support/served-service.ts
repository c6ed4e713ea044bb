// A real `roomkit serve` process for tests that stop, kill and start it again on the same
// data directory (pause, crash recovery): the servers started so far (for their logs),
// the first organization's key, and calls of the API with it.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hostTag } from '../../src/network/netns.ts';
import { startServer, type Server } from './cli.ts';
import { until } from './until.ts';

// The API's JSON bodies; the assertions that use them check their shape.
export type Json = any;

export class ServedService {
  readonly dataDir: string;
  /** The host tag of the data directory (names of its namespaces, interfaces, rules). */
  readonly tag: string;
  private readonly env: Record<string, string>;
  /** The server running now (or last). */
  server: Server | undefined;
  /** Every server started, for the logs. */
  readonly servers: Server[] = [];
  private key = '';

  constructor(dataDir: string, env: Record<string, string>) {
    this.dataDir = dataDir;
    this.tag = hostTag(dataDir);
    this.env = env;
  }

  /** Starts a server on the data directory (the first one makes the initial key). */
  async start(): Promise<Server> {
    this.server = await startServer(this.dataDir, [], this.env);
    this.servers.push(this.server);
    if (!this.key) this.key = readFileSync(join(this.dataDir, 'initial-api-key'), 'utf8').trim();
    return this.server;
  }

  /** Whether the last server started still runs. */
  running(): boolean {
    return this.server !== undefined && this.server.child.exitCode === null && this.server.child.signalCode === null;
  }

  /** Starts a server again if a failed test left none running. */
  async ensureRunning(): Promise<void> {
    if (!this.running()) await this.start();
  }

  /** The crash: SIGKILL to the server process only (no shutdown code runs). */
  async crash(): Promise<void> {
    assert.ok(this.server);
    const { signal } = await this.server.kill('SIGKILL');
    assert.equal(signal, 'SIGKILL');
  }

  /** The end of the servers' log lines, for assertion messages. */
  logTail(lines = 40): string {
    return this.servers
      .flatMap((s) => (s.output().stdout + s.output().stderr).split('\n'))
      .filter(Boolean)
      .slice(-lines)
      .join('\n');
  }

  /** ROOMKIT_TEST_LOG_FILE=<path> keeps the servers' logs, one after the other. */
  keepLogs(): void {
    const logFile = process.env.ROOMKIT_TEST_LOG_FILE;
    if (logFile) writeFileSync(logFile, this.servers.map((s, i) => `==== server ${i + 1}\n${s.output().stdout}${s.output().stderr}`).join('\n'));
  }

  async api(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
    assert.ok(this.server);
    const res = await fetch(`${this.server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  /** Every instance of the organization, stopped and failed ones included. */
  async allInstances(): Promise<Json[]> {
    const res = await this.api('GET', '/api/instances?limit=200');
    assert.equal(res.status, 200);
    return res.body.instances;
  }

  /** Polls `probe` until it gives a value; fails with the servers' last log lines after `timeoutMs`. */
  async waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, everyMs = 100): Promise<T> {
    return until(what, probe, { timeoutMs, everyMs, detail: () => this.logTail() });
  }
}
