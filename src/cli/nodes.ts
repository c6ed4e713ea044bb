// `roomkit nodes`: the nodes sharing a PostgreSQL store, as a server's operator API lists
// them (GET /operator/nodes, with ROOMKIT_OPERATOR_TOKEN); `nodes drain NODE [--wait]`
// and `nodes activate NODE` change whether creates are placed on one.
import type { Command } from 'commander';
import type { NodeInfo, NodeList } from '../cluster/node-schema.ts';
import { printJson, printTable } from './client.ts';
import { CliError } from './errors.ts';

interface NodesOptions {
  url?: string;
  operatorToken?: string;
  json?: boolean;
}

export function registerNodeCommands(program: Command): void {
  const nodes = program
    .command('nodes')
    .description('list the nodes sharing the server\'s PostgreSQL store: state, address, last heartbeat, instances and memory')
    .option('--url <url>', 'any node of the store (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--operator-token <token>', 'the operator token (env ROOMKIT_OPERATOR_TOKEN, which keeps it out of the process list)')
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(async (options: NodesOptions) => {
      const listed = await fetchNodes(options);
      if (options.json) return printJson(listed);
      const rows = listed.nodes.map((n) => [
        `${n.node_id}${n.node_id === listed.this_node ? ' *' : ''}`,
        n.state,
        n.url,
        `${(n.heartbeat_age_ms / 1000).toFixed(1)} s ago`,
        String(n.load.instances),
        `${n.load.memory_in_use_mb}/${n.capacity.memory_mb} MiB`,
        n.version,
      ]);
      printTable(['NODE', 'STATE', 'URL', 'HEARTBEAT', 'INSTANCES', 'MEMORY', 'VERSION'], rows);
    });
  nodes
    .command('drain <node>')
    .description('place no more creates on a node (its instances run on); --wait until they have ended')
    .option('--url <url>', 'any node of the store (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--operator-token <token>', 'the operator token (env ROOMKIT_OPERATOR_TOKEN)')
    .option('--wait', 'wait until the node runs no instance, showing how many are left')
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(async (node: string, options: NodesOptions & { wait?: boolean }) => {
      const drained = await operatorRequest<NodeInfo>(options, 'POST', `/operator/nodes/${encodeURIComponent(node)}/drain`);
      if (options.json && !options.wait) return printJson(drained);
      console.error(`node ${drained.node_id} is draining: no create is placed on it; ${drained.load.instances} instance(s) on it at its last heartbeat`);
      if (!options.wait) return;
      for (;;) {
        const listed = await fetchNodes(options);
        const now = listed.nodes.find((n) => n.node_id === drained.node_id);
        if (now === undefined || now.state !== 'draining') throw new CliError(`node ${drained.node_id} is ${now?.state ?? 'gone'}, no longer draining`);
        if (now.load.instances === 0) {
          console.error(`node ${now.node_id} runs no instance: it may be stopped`);
          return options.json ? printJson(now) : undefined;
        }
        console.error(`  ${now.load.instances} instance(s) left`);
        await new Promise((r) => setTimeout(r, 5_000));
      }
    });
  nodes
    .command('activate <node>')
    .description('let a drained node take creates again')
    .option('--url <url>', 'any node of the store (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--operator-token <token>', 'the operator token (env ROOMKIT_OPERATOR_TOKEN)')
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(async (node: string, options: NodesOptions) => {
      const active = await operatorRequest<NodeInfo>(options, 'POST', `/operator/nodes/${encodeURIComponent(node)}/activate`);
      if (options.json) return printJson(active);
      console.error(`node ${active.node_id} is active: creates are placed on it again`);
    });
}

async function fetchNodes(options: NodesOptions): Promise<NodeList> {
  return operatorRequest<NodeList>(options, 'GET', '/operator/nodes');
}

async function operatorRequest<T>(options: NodesOptions, method: 'GET' | 'POST', path: string): Promise<T> {
  const base = (options.url ?? process.env.ROOMKIT_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const token = options.operatorToken ?? process.env.ROOMKIT_OPERATOR_TOKEN;
  if (token === undefined || token === '') {
    throw new CliError('no operator token: set ROOMKIT_OPERATOR_TOKEN (the server\'s own) or pass --operator-token', 2);
  }
  let response: Response;
  try {
    response = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
  } catch (err) {
    throw new CliError(`connection_failed: cannot reach roomkit at ${base}: ${(err as Error).message}`);
  }
  const body = (await response.json().catch(() => undefined)) as (T & { error?: string; message?: string }) | undefined;
  if (!response.ok) {
    const hint = response.status === 404 ? ' (the server has no operator API: set ROOMKIT_OPERATOR_TOKEN where it runs)' : '';
    throw new CliError(`${body?.error ?? 'unexpected_response'}: ${body?.message ?? `HTTP ${response.status}`}${hint}`);
  }
  return body!;
}
