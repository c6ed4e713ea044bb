// The tools in the shapes their consumers take: roomkit's own (with the endpoint each maps
// to), OpenAI's function tools, Anthropic's tools and MCP's Tool.
import type { ToolDefinition } from './definitions.ts';

export const TOOL_FORMATS = ['roomkit', 'openai', 'anthropic', 'mcp'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

/** The tools in a vendor's shape; each item is exactly what that API takes, nothing more. */
export function formatTools(definitions: ToolDefinition[], format: ToolFormat): unknown[] {
  switch (format) {
    case 'roomkit':
      return definitions;
    case 'openai':
      return definitions.map((d) => ({ type: 'function', function: { name: d.name, description: d.description, parameters: d.input_schema } }));
    case 'anthropic':
      return definitions.map((d) => ({ name: d.name, description: d.description, input_schema: d.input_schema }));
    case 'mcp':
      return definitions.map(toMcpTool);
  }
}

export function toMcpTool(d: ToolDefinition) {
  return { name: d.name, title: d.title, description: d.description, inputSchema: d.input_schema, annotations: { title: d.title, ...d.annotations } };
}
