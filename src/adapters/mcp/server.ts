// roomkit as an MCP server: the tool layer's organization-wide tools (create, show and
// delete a room's machine; run commands and read, write, list and delete its files),
// over whichever backend runs them. The HTTP endpoint /mcp serves it in-process and
// `roomkit mcp` serves it on stdio over the HTTP API.
//
// It is built on the SDK's low-level Server rather than McpServer because the tools are
// defined once as JSON Schema (the same definitions GET .../tools serves); McpServer
// wants Zod schemas and would list a conversion of them instead.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import pkg from '../../../package.json' with { type: 'json' };
import { withOperationNote, type OperationNote } from '../../core/operations.ts';
import { AppError } from '../../errors.ts';
import type { ToolBackend } from '../tools/backend.ts';
import { toolDefinitions, type ToolLimits, type ToolScope } from '../tools/definitions.ts';
import { apiErrorOf, executeCall, expectToolCall, prepareCall } from '../tools/executor.ts';
import { toMcpTool } from '../tools/formats.ts';
import type { FileUrl } from '../../core/file-links.ts';

/** Told to the model by clients that pass server instructions on. */
export const INSTRUCTIONS = [
  'roomkit gives you isolated Linux machines to work in. Each machine belongs to a room, a name you choose (e.g. a task id).',
  'Create the machine with create_instance, then run shell commands and read, write, list and delete files on it with the other tools,',
  'passing the same room (and profile, when not "default") every time. Files and installed packages stay on the machine until',
  'delete_instance, so you can build on earlier work. Commands run as an unprivileged user with password-less sudo.',
].join(' ');

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** How often a tool call that runs on tells a client that asked for progress that it does. */
export const PROGRESS_INTERVAL_MS = 5000;

export interface McpServerOptions {
  backend: ToolBackend;
  limits: ToolLimits;
  /** Origin of the roomkit service, so results carry whole public URLs. */
  publicBaseUrl?: string;
  /** The URL of a file's raw bytes (the REST API's raw endpoint), for links in results. */
  fileUrl: FileUrl;
  /**
   * Words a failure that is not an API error (a bug, the service unreachable) for the
   * model, after logging it as the caller sees fit.
   */
  describeFailure: (err: unknown) => string;
  /**
   * Told as each tool call starts (before anything has run): it answers the operation
   * note to run the call in (core names in it what the call did) and what to call as the
   * call ends, with the tool's structured result or the API error code it failed with.
   * The audit trail records calls through it.
   */
  onToolCall?: () => { operation: OperationNote; ended: (outcome: { structured?: unknown; errorCode?: string }) => void };
}

export function createMcpServer(options: McpServerOptions): Server {
  const scope: ToolScope = { kind: 'organization' };
  const definitions = toolDefinitions(scope, options.limits);
  const server = new Server({ name: 'roomkit', version: pkg.version }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: definitions.map(toMcpTool) }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const audited = options.onToolCall?.();
    const call = () => {
      expectToolCall(name, args);
      return callTool(name, args, request.params._meta?.progressToken, extra);
    };
    try {
      const { answer, structured } = await (audited ? withOperationNote(audited.operation, call) : call());
      audited?.ended({ structured });
      return answer;
    } catch (err) {
      // An unknown tool's McpError carries the API's Error body as its data.
      audited?.ended(err instanceof McpError ? { structured: err.data } : { errorCode: apiErrorOf(err)?.error ?? 'internal_error' });
      throw err;
    }
  });

  async function callTool(name: string, args: unknown, token: string | number | undefined, extra: Extra): Promise<{ answer: CallToolResult; structured?: unknown }> {
    let prepared: ReturnType<typeof prepareCall>;
    try {
      prepared = prepareCall(definitions, name, args);
    } catch (err) {
      // An unknown tool is a protocol error; arguments that do not fit are the model's to
      // correct, so it reads why.
      if (err instanceof AppError && err.code === 'invalid_arguments') {
        const body = err.toBody();
        return { answer: { content: [{ type: 'text', text: `Error invalid_arguments: ${err.message}` }], isError: true, structuredContent: { ...body } }, structured: body };
      }
      throw new McpError(ErrorCode.InvalidParams, (err as Error).message, err instanceof AppError ? err.toBody() : undefined);
    }
    // A command may run for minutes, longer than clients wait for an answer by default;
    // a client that asked for progress hears that the call is alive, and may wait on.
    const started = Date.now();
    const heartbeat =
      token === undefined
        ? undefined
        : setInterval(() => {
            const seconds = Math.round((Date.now() - started) / 1000);
            extra
              .sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: seconds, message: `${name} has run for ${seconds} s` } })
              .catch(() => {});
          }, PROGRESS_INTERVAL_MS);
    try {
      // Every API error is the model's to act on here (e.g. instance_not_found: create it).
      const result = await executeCall(options.backend, scope, options.limits, prepared, {
        ...(options.publicBaseUrl === undefined ? {} : { publicBaseUrl: options.publicBaseUrl }),
        fileUrl: options.fileUrl,
        reportAsResult: () => true,
      });
      // structuredContent: the same JSON the REST tools/call answers, for clients that read
      // fields instead of text (MCP wants an object there; every tool's result is one).
      const structuredContent = isObject(result.structured) ? { structuredContent: result.structured } : {};
      return { answer: { content: result.content, isError: result.isError, ...structuredContent }, structured: result.structured };
    } catch (err) {
      return { answer: { content: [{ type: 'text', text: options.describeFailure(err) }], isError: true }, structured: { error: 'internal_error' } };
    } finally {
      clearInterval(heartbeat);
    }
  }

  return server;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
