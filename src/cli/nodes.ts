// `roomkit nodes`: the nodes sharing a PostgreSQL store, as a server's operator API lists
// them (GET /operator/nodes, with ROOMKIT_OPERATOR_TOKEN). Later: `nodes drain NODE`.
import type { Command } from 'commander';
import type { NodeList } from '../cluster/node-schema.ts';
import { printJson, printTable } from './client.ts';
import { CliError } from './errors.ts';

interface NodesOptions {
  url?: string;
  operatorToken?: string;
  json?: boolean;
}

export function registerNodeCommands(program: Command): void {
  program
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
}

async function fetchNodes(options: NodesOptions): Promise<NodeList> {
  const base = (options.url ?? process.env.ROOMKIT_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const token = options.operatorToken ?? process.env.ROOMKIT_OPERATOR_TOKEN;
  if (token === undefined || token === '') {
    throw new CliError('no operator token: set ROOMKIT_OPERATOR_TOKEN (the server\'s own) or pass --operator-token', 2);
  }
  let response: Response;
  try {
    response = await fetch(`${base}/operator/nodes`, { headers: { authorization: `Bearer ${token}` } });
  } catch (err) {
    throw new CliError(`connection_failed: cannot reach roomkit at ${base}: ${(err as Error).message}`);
  }
  const body = (await response.json().catch(() => undefined)) as (NodeList & { error?: string; message?: string }) | undefined;
  if (!response.ok) {
    const hint = response.status === 404 ? ' (the server has no operator API: set ROOMKIT_OPERATOR_TOKEN where it runs)' : '';
    throw new CliError(`${body?.error ?? 'unexpected_response'}: ${body?.message ?? `HTTP ${response.status}`}${hint}`);
  }
  return body!;
}
