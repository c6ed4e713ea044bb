// A room's tools for AI agent frameworks: the schema (the spec's "Get tool schema"), in
// roomkit's own shape or a model vendor's, and a call endpoint that runs one tool and
// answers with a result ready to hand back to the model.
import Type from 'typebox';
import { formatTools, TOOL_FORMATS } from '../../tools/formats.ts';
import type { ToolResult } from '../../tools/results.ts';
import type { RoomTools } from '../../tools/room-tools.ts';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { originOf } from '../../../http/origin.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import { IdempotencyKeyHeaders } from '../../../http/idempotency.ts';
import type { App } from '../../../http/types.ts';

const TOOLS_PATH = '/api/profile/:profile_id/room/:room_id/tools';

const Endpoint = Type.Object(
  {
    method: Type.Enum(['GET', 'POST', 'PUT', 'DELETE']),
    path: Type.String({ description: '`{path}` stands for the `path` argument' }),
    query: Type.Optional(Type.Array(Type.String(), { description: 'Arguments sent as query parameters' })),
    body: Type.Optional(Type.Array(Type.String(), { description: 'Arguments sent as JSON body fields' })),
  },
  { title: 'ToolEndpoint' },
);

const ToolSet = Type.Object(
  {
    format: Type.Enum(TOOL_FORMATS),
    profile_id: Type.String({ format: 'uuid' }),
    room_id: Type.String(),
    call: Type.Object({ method: Type.Literal('POST'), path: Type.String() }, { description: 'Where any of these tools is run by name' }),
    tools: Type.Array(Type.Unknown(), {
      description:
        '`roomkit`: {name, title, description, input_schema, annotations, endpoint}; `openai`: Chat Completions function tools ' +
        '{type: "function", function: {name, description, parameters}}; `anthropic`: Messages API tools {name, description, input_schema}; ' +
        '`mcp`: MCP Tool objects {name, title, description, inputSchema, annotations}',
    }),
    endpoints: Type.Record(Type.String(), Endpoint, { description: 'The API endpoint each tool maps to, by tool name' }),
  },
  { title: 'ToolSet' },
);

const ToolCallResult = Type.Object(
  {
    name: Type.String(),
    content: Type.Array(
      Type.Union([
        Type.Object({ type: Type.Literal('text'), text: Type.String() }),
        Type.Object({ type: Type.Literal('image'), data: Type.String({ description: 'base64' }), mime_type: Type.String() }),
      ]),
      { description: 'What the model reads, in order' },
    ),
    is_error: Type.Boolean({ description: 'A non-zero exit code, or an error the arguments caused (file not found, ...)' }),
    structured_content: Type.Unknown({
      description: "The JSON the tool's endpoint answers (its Error body when is_error comes from an error; for read_file without `content`)",
    }),
  },
  { title: 'ToolCallResult' },
);

export function toHttpResult(name: string, result: ToolResult) {
  return {
    name,
    content: result.content.map((c) => (c.type === 'text' ? c : { type: 'image' as const, data: c.data, mime_type: c.mimeType })),
    is_error: result.isError,
    structured_content: result.structured,
  };
}

export function toolRoutes(app: App, { config }: Services, tools: RoomTools): void {
  app.get(
    TOOLS_PATH,
    {
      schema: {
        operationId: 'getTools',
        summary: 'Get the room\'s tool schema',
        description:
          'Tools an AI agent can use on the room\'s instance (run a command, read, write, list and delete files), with descriptions ' +
          'stating this room\'s user, home directory, time limit and output limits, JSON Schema parameters, and the endpoint each maps to. ' +
          '`format` picks the shape: `roomkit` (default), `openai`, `anthropic` or `mcp`. The room needs no instance yet.',
        tags: ['agents'],
        params: RoomParams,
        querystring: Type.Object(
          { format: Type.Optional(Type.Enum(TOOL_FORMATS, { default: 'roomkit', description: 'Shape of `tools` (default roomkit)' })) },
          { additionalProperties: false },
        ),
        response: { 200: ToolSet, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const format = request.query.format ?? 'roomkit';
      const { definitions } = await tools.forRoom(callerOf(request).organizationId, profile_id, room_id);
      return {
        format,
        profile_id,
        room_id,
        call: { method: 'POST' as const, path: `/api/profile/${profile_id}/room/${encodeURIComponent(room_id)}/tools/call` },
        tools: formatTools(definitions, format),
        endpoints: Object.fromEntries(definitions.map((d) => [d.name, d.endpoint])),
      };
    },
  );

  app.post(
    `${TOOLS_PATH}/call`,
    {
      // A model's tool call has an id: a retry of the call with it runs the tool once.
      config: { auditAction: 'tool.call', idempotency: { keyOf: (request) => callIdKey((request.body as { call_id?: string } | undefined)?.call_id) } },
      // write_file carries a whole file, base64-encoded when binary.
      bodyLimit: Math.ceil(config.maxUploadBytes * 1.4) + 1024,
      schema: {
        operationId: 'callTool',
        summary: 'Run one of the room\'s tools',
        description:
          'Runs a tool by name, as a model asked for it, and answers with a result to hand back to the model: text (and images, for ' +
          'read_file on an image), `is_error`, and the endpoint\'s own JSON. A failing command, or a file that does not exist, is a ' +
          'result with `is_error: true`, not an HTTP error. An unknown tool is `400 unknown_tool`, arguments that do not fit its ' +
          'schema `400 invalid_arguments`; no profile, no instance or an instance not ready are the usual 404 and 409.',
        tags: ['agents'],
        params: RoomParams,
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 128, description: 'The tool, e.g. `run_command`' }),
            call_id: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 200,
                pattern: '^[\\x20-\\x7e]+$',
                description:
                  'The id the model gave the call (OpenAI\'s `tool_calls[].id`, Anthropic\'s `tool_use` `id`): a retry of the call with the ' +
                  'same id answers the first call\'s result and runs nothing again (as an Idempotency-Key, which wins when both are sent); ' +
                  'the same id with another call answers 422 `idempotency_key_reused`',
              }),
            ),
            arguments: Type.Optional(
              Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.String()], {
                description: 'The tool\'s arguments: an object, or its JSON text (as OpenAI tool calls carry it); default {}',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        headers: IdempotencyKeyHeaders,
        response: { 200: ToolCallResult, ...errorResponses(400, 401, 404, 409, 413, 422, 429, 500, 503) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const { call_id: _callId, ...call } = request.body;
      const result = await tools.call(callerOf(request).organizationId, profile_id, room_id, call, { publicBaseUrl: originOf(request, config.publicUrl) });
      return toHttpResult(request.body.name, result);
    },
  );
}

/** A tool call's id as an Idempotency-Key, apart from keys sent as the header. */
function callIdKey(callId: string | undefined): string | undefined {
  return callId === undefined ? undefined : `tool-call:${callId}`;
}
