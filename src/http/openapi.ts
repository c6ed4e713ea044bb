// The API's OpenAPI document (/openapi.json), made by @fastify/swagger from the routes'
// schemas, and its reference page (/docs, Scalar's, served from node_modules). Routes
// say what validation cannot (answers that are not JSON, event streams, WebSocket
// upgrades) in `config.documentedResponses`; this file adds what every operation
// shares: its security, the file path parameter's name, the server. The document
// stays clean under `redocly lint` (test/unit/openapi.test.ts, with redocly.yaml).
import swagger from '@fastify/swagger';
import scalar from '@scalar/fastify-api-reference';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../services.ts';
import { requiresAuth } from './auth.ts';
import type { App } from './types.ts';

/** One answer as the document gives it: a description, and its body in each media type it comes in. */
export interface DocumentedResponse {
  description: string;
  content?: Record<string, { schema: object; example?: unknown }>;
  headers?: Record<string, { description: string; schema: object }>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Answers documented beside (or instead of) the route's response schemas: those
     * that are not JSON or come in more than one media type. Only the document reads
     * them; a route's `schema.response` still serializes what it sends.
     */
    documentedResponses?: Record<number, DocumentedResponse>;
  }
}

/** The name the document gives a route's trailing wildcard (Fastify's `*`), which OpenAPI cannot name `*`. */
export const WILDCARD_PARAMETER = 'path';

const DESCRIPTION = `Isolated machines for AI agents: create an instance in a room of a profile, run shell
commands in it and get back their output, exit code and every file they changed, and move
files in and out.

**Authentication.** Every \`/api/\` operation and \`/mcp\` needs \`Authorization: Bearer <API key>\`
(\`rk_live_…\` or \`rk_test_…\`). \`/healthz\`, \`/readyz\`, \`/openapi.json\`, \`/docs\` and the raw
file URLs under \`/vm/\` need none.

**Errors.** Every refusal has the same JSON body, \`{"error": "<code>", "message": "…", "request_id": "…"}\`,
with a stable code to branch on and a message that says what to fix.

**Streaming.** \`POST …/command\` with \`"stream": true\` (or \`Accept: text/event-stream\`) answers with
Server-Sent Events as the command prints: \`started\` (its command id), \`output\` pieces
(\`{"data", "offset", "stream"}\`), then \`result\` (the CommandResult) or \`error\` (an Error body).
A comment line every 15 s keeps quiet streams open. \`/mcp\` answers JSON-RPC over the same
event-stream format. Long work can also run in the background (\`"background": true\`, then
\`GET …/commands/{command_id}?offset=N\`).

**Terminals** are WebSockets (\`GET …/terminal\`), opened with a single-use ticket from
\`POST …/terminal/ticket\`.

**SDKs.** The TypeScript SDK (\`@roomkit/sdk\`) and the Python SDK (\`roomkit\`) are versioned with
this API: the SDK of version X speaks the API of version X. Each operation's \`operationId\`
is stable.`;

/** Registers the document and /docs. The operator's and the metrics token's schemes exist only where their routes need them. */
export async function installOpenApi(app: App, services: Services, version: string): Promise<void> {
  const { config } = services;
  const metricsToken = config.metricsToken !== undefined && config.metricsToken !== 'off';
  const operatorToken = config.operatorToken !== undefined;
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'roomkit',
        version,
        description: DESCRIPTION,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      // ROOMKIT_PUBLIC_URL where the operator set it; else `/`, the server that served the document.
      servers: [{ url: config.publicUrl ?? '/', description: 'This roomkit server' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An API key of the organization: rk_live_... or rk_test_...' },
          ...(operatorToken ? { operatorToken: { type: 'http', scheme: 'bearer', description: 'The server\'s ROOMKIT_OPERATOR_TOKEN' } } : {}),
          ...(metricsToken ? { metricsToken: { type: 'http', scheme: 'bearer', description: 'The server\'s ROOMKIT_METRICS_TOKEN' } } : {}),
        },
      },
      tags: [
        { name: 'instances', description: 'A room\'s instance' },
        { name: 'commands', description: 'Shell commands in a room\'s instance' },
        { name: 'files', description: 'Files of a room\'s instance' },
        { name: 'contexts', description: 'Code contexts: interpreters in a room\'s instance that keep their state between runs' },
        { name: 'terminals', description: 'Interactive terminals in a room\'s instance, over WebSocket' },
        { name: 'ports', description: 'Programs listening on ports of a room\'s instance, reached from outside (HTTP and WebSocket)' },
        { name: 'agents', description: 'Tools for AI agents: tool schemas, tool calls, MCP' },
        { name: 'profiles', description: 'VM configuration templates' },
        { name: 'keys', description: 'API keys of the organization' },
        { name: 'usage', description: 'The organization\'s quotas and its use of them' },
        ...(operatorToken ? [{ name: 'operator', description: 'For the operator, with ROOMKIT_OPERATOR_TOKEN' }] : []),
        { name: 'audit', description: 'The record of what the organization\'s keys changed' },
        { name: 'meta', description: 'Service health, metrics and this document' },
      ],
    },
    stripBasePath: false,
    // Shared schemas appear under their $id (`Error`), not as def-0, def-1, ...
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transform: ({ schema, url, route }) => {
      let documented: Record<string, unknown> = { ...schema, security: securityOf(url, metricsToken) };
      const extra = route.config?.documentedResponses;
      if (extra !== undefined) documented.response = { ...(schema?.response as object | undefined), ...extra };
      let path = url;
      if (path.endsWith('*')) {
        path = `${path.slice(0, -1)}:${WILDCARD_PARAMETER}`;
        documented = { ...documented, params: renameWildcard(schema?.params) };
      }
      return { schema: documented, url: path };
    },
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(scalar, {
    routePrefix: '/docs',
    logLevel: 'warn',
    hooks: { onRequest: docsHeaders },
    configuration: {
      url: '/openapi.json',
      pageTitle: `roomkit API ${version}`,
      // Everything the page loads comes from this server: no fonts, proxy, telemetry,
      // hosted client or AI chat from elsewhere (docsHeaders' CSP holds the browser to it).
      withDefaultFonts: false,
      telemetry: false,
      hideClientButton: true,
      showDeveloperTools: 'never',
      mcp: { disabled: true },
      agent: { disabled: true },
      documentDownloadType: 'json',
      metaData: { title: `roomkit API ${version}`, description: 'Reference of the roomkit HTTP API' },
    },
  });
}

/** Who may call a route, as the document says it: an API key, the operator's or metrics token, or anyone. */
function securityOf(url: string, metricsToken: boolean): Record<string, string[]>[] {
  if (requiresAuth(url)) return [{ apiKey: [] }];
  if (url.startsWith('/operator/')) return [{ operatorToken: [] }];
  if (url === '/metrics' && metricsToken) return [{ metricsToken: [] }];
  return [];
}

/** A params schema with its `*` property named WILDCARD_PARAMETER instead, as the document's path names it. */
function renameWildcard(params: unknown): object | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const schema = params as { properties?: Record<string, unknown>; required?: string[] };
  const properties = Object.fromEntries(Object.entries(schema.properties ?? {}).map(([name, value]) => [name === '*' ? WILDCARD_PARAMETER : name, value]));
  const required = (schema.required ?? []).map((name) => (name === '*' ? WILDCARD_PARAMETER : name));
  return { ...schema, properties, required };
}

/**
 * The reference page may load only what this server serves: its script, the document,
 * inline styles and data: images. A page that reached elsewhere would break on a server
 * without Internet access, and tell a third party who reads the API.
 */
async function docsHeaders(_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header(
    'Content-Security-Policy',
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  );
  reply.header('Referrer-Policy', 'no-referrer');
}
