// The MCP endpoint: roomkit's tools over MCP's Streamable HTTP transport, for agent
// clients that speak MCP. Stateless: every POST gets its own server and transport, bound
// to the caller's organization, so nothing is kept between requests and any instance of
// the service can answer any request. Authentication is the API's bearer key.
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { RoomTools } from '../tools/room-tools.ts';
import { createMcpServer } from './server.ts';
import type { Services } from '../../services.ts';
import { auditToolCalls } from '../../http/audit.ts';
import { callerOf } from '../../http/auth.ts';
import { originOf } from '../../http/origin.ts';
import { errorResponses } from '../../http/schemas.ts';
import type { App } from '../../http/types.ts';

export function mcpRoutes(app: App, { config, audit }: Services, tools: RoomTools): void {
  app.post(
    '/mcp',
    {
      // write_file carries a whole file, base64-encoded when binary.
      bodyLimit: Math.ceil(config.maxUploadBytes * 1.4) + 1024,
      config: {
        documentedResponses: {
          200: {
            description: 'The JSON-RPC answer, as one Server-Sent Event (`event: message`)',
            content: {
              'text/event-stream': {
                schema: { type: 'string', description: 'Server-Sent Events whose data are JSON-RPC messages' },
                example: 'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"run_command",…}]}}\n\n',
              },
            },
          },
          202: { description: 'Accepted: the body was a notification or a response, which get no answer' },
        },
      },
      schema: {
        operationId: 'mcp',
        summary: 'MCP server (Streamable HTTP)',
        description:
          'A Model Context Protocol endpoint (Streamable HTTP, stateless: no session id) with the tools create_instance, get_instance, ' +
          'delete_instance, run_command, read_file, write_file, list_files and delete_file, each taking `room` and `profile` ' +
          '(name or id, default "default"). The body is a JSON-RPC message; answers are JSON-RPC over SSE. GET and DELETE answer 405: ' +
          'there is no session to stream to or to end.',
        tags: ['agents'],
        response: { ...errorResponses(401, 413, 415) },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const server = createMcpServer({
        backend: tools.backend(caller.organizationId, caller.keyId),
        limits: tools.limits,
        fileUrl: tools.fileUrl,
        publicBaseUrl: originOf(request, config.publicUrl),
        onToolCall: auditToolCalls(request, audit),
        // API errors are tool results already; what is left is a bug.
        describeFailure: (err) => {
          request.log.error({ err }, 'MCP tool call failed');
          return `Error internal_error: an internal error occurred; the server log has the details under request id ${request.id}`;
        },
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      // The transport writes the response itself (with its own Cache-Control); the headers
      // every response carries, and those hooks set before (the RateLimit fields), are set here.
      reply.hijack();
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
      reply.raw.setHeader('X-Request-Id', request.id);
      reply.raw.setHeader('X-Content-Type-Options', 'nosniff');
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(request.raw, reply.raw, request.body);
      } catch (err) {
        request.log.error({ err }, 'MCP request failed');
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { 'Content-Type': 'application/json; charset=utf-8' });
          reply.raw.end(
            JSON.stringify({
              error: 'internal_error',
              message: `an internal error occurred; the server log has the details under request id ${request.id}`,
              request_id: request.id,
            }),
          );
        } else {
          reply.raw.end();
        }
      }
    },
  );
}
