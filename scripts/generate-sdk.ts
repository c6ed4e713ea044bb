// Writes sdk/src/generated/api.ts: TypeScript types for every route of the server's
// OpenAPI document, so the SDK is type-checked against the schemas the server validates
// with; and sets sdk/package.json's version to the API's (info.version, from
// API_VERSION in src/app.ts), since the SDK is versioned with the API. The document comes from the real app built in-process (no listening, no
// runtime); test/host/sdk.test.ts renders the document of a running server again and fails
// when the checked-in file differs.
//
// Only the shape of the data becomes types: bounds, patterns and formats stay the
// server's business, and they may depend on the host (memory_mb's maximum does), while
// this file must be the same on every machine. It lives outside sdk/ because it builds
// the server, and the SDK package imports nothing of the server's code.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const GENERATED_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'sdk', 'src', 'generated', 'api.ts');
export const SDK_PACKAGE_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'sdk', 'package.json');

type Schema = Record<string, unknown> | boolean;

export interface OpenApiDocument {
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}

interface Operation {
  summary?: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;
const COMPONENT_REF = '#/components/schemas/';
/** Names that would shadow a global the SDK needs. */
const RESERVED = new Set(['Error', 'Object', 'Array', 'String', 'Number', 'Boolean', 'Date', 'Map', 'Set', 'Promise', 'Record', 'Response', 'Request']);

/** Builds the app with the runtime disabled in a scratch data directory and returns its /openapi.json. */
export async function openApiDocument(): Promise<OpenApiDocument> {
  const { loadConfig } = await import('../src/config.ts');
  const { createLogger } = await import('../src/log.ts');
  const { createServices } = await import('../src/services.ts');
  const { buildApp } = await import('../src/app.ts');
  const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-sdk-generate-'));
  try {
    // An empty environment: ROOMKIT_* variables of whoever runs this must not matter.
    const config = loadConfig({ dataDir, runtime: 'none', logLevel: 'silent' }, {});
    const services = await createServices(config, createLogger('silent'));
    try {
      const app = await buildApp(services);
      try {
        const res = await app.inject({ method: 'GET', url: '/openapi.json' });
        if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}: ${res.body}`);
        return res.json() as OpenApiDocument;
      } finally {
        await app.close();
      }
    } finally {
      await services.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The source text of sdk/src/generated/api.ts for an OpenAPI document. */
export function renderApi(doc: OpenApiDocument): string {
  const emitter = new Emitter(doc.components?.schemas ?? {});
  const paths: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    const ops: string[] = [];
    for (const method of METHODS) {
      const op = item[method];
      if (op) ops.push(emitter.operation(method, op));
    }
    paths.push(`  ${key(path)}: {\n${ops.join('\n')}\n  };`);
  }
  const errorCodes = emitter.errorCodes();
  const parts = [
    '// Types of the roomkit HTTP API, generated from the server\'s /openapi.json by',
    '// scripts/generate-sdk.ts. Do not edit: change the route schemas, then run',
    '// `npm run sdk:generate`.',
    '',
    '/** The API version these types were generated from. */',
    `export const API_VERSION = ${quote(doc.info.version)};`,
    '',
  ];
  if (errorCodes.length > 0) {
    parts.push('/** Every error code the server defines (the `error` field of an error body). */');
    parts.push(`export type KnownErrorCode =\n${errorCodes.map((c) => `  | ${quote(c)}`).join('\n')};`, '');
  }
  // Named types are emitted after the paths were walked, since walking them is what
  // finds the titled schemas; sorted so the file does not depend on route order.
  const pathsText = `/** Every route: its path and query parameters, JSON body, and responses by status. */\nexport interface Paths {\n${paths.join('\n')}\n}\n`;
  for (const [, text] of [...emitter.named.entries()].sort(([a], [b]) => a.localeCompare(b))) parts.push(text, '');
  parts.push(pathsText);
  return parts.join('\n');
}

/** The text of sdk/package.json (given as it is) with its version set to the document's API version. */
export function renderPackageJson(current: string, doc: OpenApiDocument): string {
  const pkg = JSON.parse(current) as Record<string, unknown>;
  pkg.version = doc.info.version;
  return `${JSON.stringify(pkg, null, 2)}\n`;
}

class Emitter {
  readonly named = new Map<string, string>();
  /** The schema each name was made from, to refuse two different schemas with one title. */
  readonly #sources = new Map<string, string>();
  readonly #components: Record<string, Schema>;

  constructor(components: Record<string, Schema>) {
    this.#components = components;
    for (const [name, schema] of Object.entries(components)) this.#define(typeName(name), schema);
  }

  errorCodes(): string[] {
    const error = this.#components.Error;
    if (typeof error !== 'object') return [];
    const examples = (error.properties as Record<string, { examples?: unknown }> | undefined)?.error?.examples;
    return Array.isArray(examples) ? examples.filter((e): e is string => typeof e === 'string') : [];
  }

  operation(method: string, op: Operation): string {
    const lines: string[] = [];
    if (op.summary) lines.push(...doc(op.summary, '    '));
    lines.push(`    ${method}: {`);
    lines.push(`      params: ${this.#parameters(op.parameters ?? [], 'path', '      ')};`);
    lines.push(`      query: ${this.#parameters(op.parameters ?? [], 'query', '      ')};`);
    const body = op.requestBody?.content?.['application/json']?.schema;
    lines.push(`      body: ${body === undefined ? 'undefined' : this.type(body, '      ')};`);
    const responses = Object.entries(op.responses ?? {}).map(([status, response]) => {
      const schema = response.content?.['application/json']?.schema;
      return `        ${/^\d+$/.test(status) ? status : key(status)}: ${schema === undefined ? 'undefined' : this.type(schema, '        ')};`;
    });
    lines.push(`      responses: {\n${responses.join('\n')}\n      };`);
    lines.push('    };');
    return lines.join('\n');
  }

  #parameters(parameters: Parameter[], where: 'path' | 'query', indent: string): string {
    const list = parameters.filter((p) => p.in === where);
    if (list.length === 0) return 'Record<string, never>';
    const fields = list.map((p) => {
      const comment = p.description ? doc(p.description, `${indent}  `).join('\n') + '\n' : '';
      const optional = p.required === true || where === 'path' ? '' : '?';
      return `${comment}${indent}  ${key(p.name)}${optional}: ${this.type(p.schema ?? true, `${indent}  `)};`;
    });
    return `{\n${fields.join('\n')}\n${indent}}`;
  }

  /** The TypeScript type of a schema, written at the given indentation. */
  type(schema: Schema, indent: string): string {
    if (typeof schema === 'boolean') return schema ? 'unknown' : 'never';
    const ref = schema.$ref;
    if (typeof ref === 'string') {
      if (ref.startsWith(COMPONENT_REF)) return typeName(ref.slice(COMPONENT_REF.length));
      // @fastify/swagger writes shared schemas as `<$id>#` in places.
      const id = ref.replace(/#$/, '');
      if (id in this.#components) return typeName(id);
      throw new Error(`cannot resolve $ref ${ref}`);
    }
    if (typeof schema.title === 'string') return this.#define(typeName(schema.title), schema);
    return this.#body(schema, indent);
  }

  #define(name: string, schema: Schema): string {
    // Examples are not part of the type, and @fastify/swagger moves a response's top
    // examples to its media object: the same schema may come with them or without.
    const { examples: _examples, example: _example, ...shape } = typeof schema === 'object' ? schema : { examples: undefined, example: undefined };
    const source = JSON.stringify(typeof schema === 'object' ? shape : schema);
    const seen = this.#sources.get(name);
    if (seen !== undefined) {
      if (seen !== source) throw new Error(`two different schemas are named ${name}; give one another title`);
      return name;
    }
    this.#sources.set(name, source);
    this.named.set(name, ''); // reserved first, so a schema that refers to itself ends
    const body = this.#body(schema, '');
    const comment = typeof schema === 'object' && typeof schema.description === 'string' ? doc(schema.description, '').join('\n') + '\n' : '';
    const isInterface = body.startsWith('{') && group(body) === body;
    this.named.set(name, `${comment}export ${isInterface ? `interface ${name} ${body}` : `type ${name} = ${body};`}`);
    return name;
  }

  #body(schema: Schema, indent: string): string {
    if (typeof schema === 'boolean') return schema ? 'unknown' : 'never';
    let type: string;
    if ('const' in schema) type = literal(schema.const);
    else if (Array.isArray(schema.enum)) type = union(schema.enum.map(literal));
    else if (Array.isArray(schema.anyOf)) type = union((schema.anyOf as Schema[]).map((s) => this.type(s, indent)));
    else if (Array.isArray(schema.oneOf)) type = union((schema.oneOf as Schema[]).map((s) => this.type(s, indent)));
    else if (Array.isArray(schema.allOf)) type = (schema.allOf as Schema[]).map((s) => group(this.type(s, indent))).join(' & ');
    else if (Array.isArray(schema.type)) type = union(schema.type.map((t) => this.#body({ ...schema, type: t }, indent)));
    else type = this.#simple(schema, indent);
    return schema.nullable === true ? union([type, 'null']) : type;
  }

  #simple(schema: Record<string, unknown>, indent: string): string {
    switch (schema.type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array': {
        if (Array.isArray(schema.prefixItems)) {
          return `[${(schema.prefixItems as Schema[]).map((s) => this.type(s, indent)).join(', ')}]`;
        }
        return schema.items === undefined ? 'unknown[]' : `${group(this.type(schema.items as Schema, indent))}[]`;
      }
      case 'object':
        return this.#object(schema, indent);
      default:
        if (schema.properties !== undefined || schema.additionalProperties !== undefined) return this.#object(schema, indent);
        return 'unknown';
    }
  }

  #object(schema: Record<string, unknown>, indent: string): string {
    const properties = (schema.properties ?? {}) as Record<string, Schema>;
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    const extra = schema.additionalProperties;
    const patterns = Object.values((schema.patternProperties ?? {}) as Record<string, Schema>);
    const names = Object.keys(properties);
    // The type of keys beyond the named ones, or undefined when there are none.
    let rest: string | undefined;
    if (patterns.length > 0) rest = union(patterns.map((s) => this.type(s, indent)));
    else if (extra === false) rest = undefined;
    else if (extra === undefined || extra === true) rest = names.length === 0 ? 'unknown' : undefined;
    else rest = this.type(extra as Schema, indent);
    if (names.length === 0) return rest === undefined ? 'Record<string, never>' : `Record<string, ${rest}>`;
    const inner = `${indent}  `;
    const fields = names.map((name) => {
      const property = properties[name] as Schema;
      const comment = typeof property === 'object' && typeof property.description === 'string' && typeof property.title !== 'string'
        ? doc(property.description, inner).join('\n') + '\n'
        : '';
      return `${comment}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${this.type(property, inner)};`;
    });
    // An index signature must admit every named property's type, so beside named
    // properties the other keys can only be unknown.
    if (rest !== undefined) fields.push(`${inner}[key: string]: unknown;`);
    return `{\n${fields.join('\n')}\n${indent}}`;
  }
}

function typeName(name: string): string {
  const clean = name.replace(/[^A-Za-z0-9_$]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''));
  const pascal = clean.charAt(0).toUpperCase() + clean.slice(1);
  const safe = /^[A-Za-z_$]/.test(pascal) ? pascal : `T${pascal}`;
  return RESERVED.has(safe) ? `${safe}Body` : safe;
}

function key(name: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : quote(name);
}

function quote(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
}

function literal(value: unknown): string {
  if (typeof value === 'string') return quote(value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new Error(`cannot write ${JSON.stringify(value)} as a literal type`);
}

function union(types: string[]): string {
  const unique = [...new Set(types)];
  if (unique.includes('unknown')) return 'unknown';
  return unique.length === 0 ? 'never' : unique.join(' | ');
}

/** Parenthesised when it is a union or intersection, for use in `T[]` or `A & B`. */
function group(type: string): string {
  let depth = 0;
  for (let i = 0; i < type.length; i++) {
    const c = type[i];
    if (c === "'") {
      // Skip a string literal, whose text may hold any of the characters below.
      for (i++; i < type.length && type[i] !== "'"; i++) if (type[i] === '\\') i++;
    } else if (c === '{' || c === '(' || c === '[' || c === '<') depth++;
    else if (c === '}' || c === ')' || c === ']' || c === '>') depth--;
    else if (depth === 0 && (c === '|' || c === '&')) return `(${type})`;
  }
  return type;
}

function doc(text: string, indent: string): string[] {
  const lines = text.replace(/\*\//g, '*\\/').split('\n');
  if (lines.length === 1) return [`${indent}/** ${lines[0]} */`];
  return [`${indent}/**`, ...lines.map((l) => `${indent} * ${l}`.trimEnd()), `${indent} */`];
}

if (import.meta.main) {
  const doc = await openApiDocument();
  writeFileSync(GENERATED_FILE, renderApi(doc));
  writeFileSync(SDK_PACKAGE_FILE, renderPackageJson(readFileSync(SDK_PACKAGE_FILE, 'utf8'), doc));
  process.stdout.write(`wrote ${relative(process.cwd(), GENERATED_FILE)} and the version of ${relative(process.cwd(), SDK_PACKAGE_FILE)}\n`);
}
