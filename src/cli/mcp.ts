// `roomkit mcp`: roomkit's tools as an MCP server on stdio, for desktop agent clients that
// start their MCP servers as child processes. It runs where the client runs and reaches a
// roomkit server over its HTTP API with an API key, so stdout carries only the protocol:
// anything for people goes to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { DEFAULT_BASE_URL } from '../../sdk/src/index.ts';
import { loadConfig } from '../config.ts';
import { toolLimits } from '../adapters/tools/local-backend.ts';
import { createMcpServer } from '../adapters/mcp/server.ts';
import { RemoteToolBackend } from '../adapters/tools/remote-backend.ts';
import { rawFileUrl } from '../adapters/rest/raw-file-url.ts';
import { CliError } from './errors.ts';

export async function mcpStdio(options: { url?: string | undefined; apiKey?: string | undefined }): Promise<void> {
  const url = options.url ?? nonEmpty(process.env.ROOMKIT_URL) ?? DEFAULT_BASE_URL;
  const apiKey = options.apiKey ?? nonEmpty(process.env.ROOMKIT_API_KEY);
  if (apiKey === undefined) {
    throw new CliError('roomkit mcp needs an API key: set ROOMKIT_API_KEY (or pass --api-key); `roomkit keys create` makes one', 2);
  }
  let backend: RemoteToolBackend;
  try {
    backend = new RemoteToolBackend({ baseUrl: url, apiKey });
  } catch (err) {
    throw new CliError((err as Error).message, 2);
  }
  const warn = (message: string) => process.stderr.write(`roomkit mcp: ${message}\n`);

  const server = createMcpServer({
    backend,
    // The server's own limits are not published; these are its defaults.
    limits: toolLimits(loadConfig({}, {})),
    publicBaseUrl: backend.client.baseUrl,
    // The server it reaches links files at its REST API's raw endpoint.
    fileUrl: rawFileUrl,
    describeFailure: (err) => {
      const code = (err as { code?: unknown }).code;
      const message = err instanceof Error ? err.message : String(err);
      warn(`a tool call failed: ${message}`);
      if (code === 'connection_failed' || code === 'timeout') return `Error ${code}: roomkit at ${backend.client.baseUrl} did not answer: ${message}`;
      return typeof code === 'string' ? `Error ${code}: ${message}` : `Error: ${message}`;
    },
  });
  server.onerror = (err) => warn(`protocol error: ${err.message}`);

  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve;
  });
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // The client ends the session by closing our stdin, or with a signal. After stdin
  // ends, requests already received are still answered (a client may write its requests
  // and close its end at once), then the server closes.
  let pending = 0;
  let ending = false;
  const closeWhenDone = () => {
    if (ending && pending === 0) void server.close();
  };
  const receive = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    if ('method' in message && 'id' in message) pending++;
    receive?.(message);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    await send(message);
    if (!('method' in message) && 'id' in message) {
      pending--;
      closeWhenDone();
    }
  };
  process.stdin.once('end', () => {
    ending = true;
    closeWhenDone();
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void server.close());

  // A wrong URL or key would otherwise show only at the first tool call, inside the
  // client; say so at once where the client keeps the server's log.
  backend.client.profiles.list().then(
    (profiles) => warn(`connected to ${backend.client.baseUrl}; profiles: ${profiles.map((p) => p.name).join(', ') || 'none'}`),
    (err: Error) => warn(`cannot use ${backend.client.baseUrl} yet: ${err.message}`),
  );

  await closed;
  // Idle keep-alive connections to the server would hold the process open a while longer.
  process.exit(0);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
