// The organization's templates: images built from Dockerfiles, which a profile names as
// `template:NAME`. A build answers at once; `follow` reads its log as it is written
// (the server's event stream) and answers with the template as the build left it.
import type { RequestOptions, Transport } from './http.ts';
import { readEvents } from './http.ts';
import { RoomkitError } from './errors.ts';
import type { Template, TemplateBuildStarted, TemplateList } from './types.ts';

export interface TemplateBuildInput {
  name: string;
  /** The Dockerfile's text. */
  dockerfile: string;
  /** The build context that COPY and ADD read: each file's relative path and its bytes. */
  files?: Record<string, Uint8Array | string>;
}

export class Templates {
  readonly #transport: Transport;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /** Starts a build of the Dockerfile under `name` (a new template or a rebuild); answers at once. Not retried. */
  async build(input: TemplateBuildInput, options: RequestOptions = {}): Promise<TemplateBuildStarted> {
    const files = input.files === undefined ? undefined : Object.fromEntries(Object.entries(input.files).map(([path, data]) => [path, base64Of(data)]));
    const body = { name: input.name, dockerfile: input.dockerfile, ...(files === undefined ? {} : { files }) };
    return this.#transport.json('post', '/api/templates', { body }, { ...options, idempotent: false });
  }

  async list(options: RequestOptions = {}): Promise<TemplateList> {
    return this.#transport.json('get', '/api/templates', {}, options);
  }

  /** By its name or its template_id. */
  async get(nameOrId: string, options: RequestOptions = {}): Promise<Template> {
    return this.#transport.json('get', '/api/templates/{name_or_id}', { params: { name_or_id: nameOrId } }, options);
  }

  /** A build's log as text, as far as it is written. */
  async logs(nameOrId: string, buildId: string, options: RequestOptions = {}): Promise<string> {
    const { response, done } = await this.#transport.send('get', '/api/templates/{name_or_id}/builds/{build_id}/logs', { params: { name_or_id: nameOrId, build_id: buildId } }, options);
    try {
      return await response.text();
    } finally {
      done();
    }
  }

  /**
   * Passes a build's log to `onLog` as it is written, until the build ends, and answers
   * with the template then. A build already ended gives its whole log at once.
   */
  async follow(nameOrId: string, buildId: string, onLog: (text: string) => void, options: RequestOptions = {}): Promise<Template> {
    const { response, url, done } = await this.#transport.send(
      'get',
      '/api/templates/{name_or_id}/builds/{build_id}/logs',
      { params: { name_or_id: nameOrId, build_id: buildId } },
      { ...options, stream: true, headers: { accept: 'text/event-stream' } },
    );
    try {
      if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        onLog(await response.text());
        return await this.get(nameOrId, options);
      }
      for await (const { event, data } of readEvents(response.body as ReadableStream<Uint8Array>)) {
        if (event === 'log') onLog((JSON.parse(data) as { text: string }).text);
        else if (event === 'end') return JSON.parse(data) as Template;
      }
      throw new RoomkitError({ status: response.status, code: 'unexpected_response', message: `GET ${url}: the stream ended before the build did` });
    } finally {
      done();
    }
  }

  /** Deletes the template (a build under way is stopped); answers with it as it was. */
  async delete(nameOrId: string, options: RequestOptions = {}): Promise<Template> {
    return this.#transport.json('delete', '/api/templates/{name_or_id}', { params: { name_or_id: nameOrId } }, options);
  }
}

function base64Of(data: Uint8Array | string): string {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}
