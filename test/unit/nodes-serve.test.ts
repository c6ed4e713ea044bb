// Two real `roomkit serve` processes on one PostgreSQL store (no runtime: this is about
// the nodes, not instances): each registers at its own address and both list the two;
// a node killed with SIGKILL is declared lost by the other once it has been silent past
// the limit; a clean stop is recorded as left. Only a PostgreSQL run has nodes: on
// SQLite the test is skipped, saying so.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { NodeList } from '../../src/cluster/node-schema.ts';
import { type Server, startServer } from '../support/cli.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const TOKEN = 'nodes-test-operator-token-0123456789abcdef';
const LOST_AFTER_MS = 1500;
const dirs: string[] = [];
const servers: Server[] = [];

after(async () => {
  for (const server of servers) await server.stop();
  for (const dir of dirs) await dropTestStore(dir);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function nodesOf(server: Server): Promise<NodeList> {
  const res = await fetch(`${server.url}/operator/nodes`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as NodeList;
}

describe('nodes of one PostgreSQL store', { skip: TEST_STORE !== 'postgres' && 'nodes exist only with a PostgreSQL store (scripts/test --store postgres)' }, () => {
  it('register, see each other, and a killed one is declared lost by the other', async () => {
    for (let i = 0; i < 2; i++) dirs.push(mkdtempSync(join(tmpdir(), `roomkit-node-${i}-`)));
    const { databaseUrl } = await testStoreConfig(dirs[0]!);
    const env = {
      ROOMKIT_DATABASE_URL: databaseUrl!,
      ROOMKIT_OPERATOR_TOKEN: TOKEN,
      ROOMKIT_NODE_HEARTBEAT_MS: '200',
      ROOMKIT_NODE_LOST_AFTER_MS: String(LOST_AFTER_MS),
    };
    const a = await startServer(dirs[0]!, [], env);
    servers.push(a);
    const b = await startServer(dirs[1]!, ['--node-url', 'http://192.0.2.7:8080'], env);
    servers.push(b);

    const both = await until('both nodes registered', async () => {
      const listed = await nodesOf(a);
      return listed.nodes.filter((n) => n.state === 'active').length === 2 ? listed : undefined;
    }, { everyMs: 100 });
    const urls = both.nodes.map((n) => n.url).sort();
    assert.deepEqual(urls, [a.url, 'http://192.0.2.7:8080'].sort());
    const bId = both.nodes.find((n) => n.url === 'http://192.0.2.7:8080')!.node_id;
    assert.notEqual(bId, both.this_node);
    assert.equal((await nodesOf(b)).this_node, bId);

    const killedAt = Date.now();
    await b.kill('SIGKILL');
    const lost = await until('the killed node declared lost', async () => {
      const node = (await nodesOf(a)).nodes.find((n) => n.node_id === bId);
      return node?.state === 'lost' ? node : undefined;
    }, { timeoutMs: 15_000, everyMs: 50 });
    const tookMs = Date.now() - killedAt;
    assert.equal(lost.lost_by, both.this_node);
    assert.ok(tookMs >= LOST_AFTER_MS - 300 && tookMs < LOST_AFTER_MS + 5_000, `declared lost ${tookMs} ms after the kill`);

    await a.stop();
    servers.length = 0;
    const c = await startServer(dirs[1]!, [], env);
    servers.push(c);
    // The killed node's data directory keeps its id: started again, it is the same node, active again.
    const again = await until('the node back', async () => {
      const node = (await nodesOf(c)).nodes.find((n) => n.node_id === bId);
      return node?.state === 'active' ? node : undefined;
    }, { everyMs: 100 });
    assert.equal(again.lost_by, null);
    const aNode = (await nodesOf(c)).nodes.find((n) => n.node_id === both.this_node);
    assert.equal(aNode?.state, 'left', 'a clean stop is recorded as left');
  });
});
