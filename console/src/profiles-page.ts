// The organization's profiles: the list (/console/profiles), one profile's fields with
// delete (/console/profiles/{profile_id}), and the forms that create one
// (/console/profiles/new) and edit one (/console/profiles/{profile_id}/edit). A form is
// drawn from its request body's schema in /openapi.json (every field, its description,
// its default, its bounds), so it offers what the API takes and nothing else, and sends
// only the fields changed (from the defaults, or from the profile's values); what the
// server refuses is shown with the validation messages of the Error body, each beside
// its field.
import type { Profile } from '../../sdk/src/generated/api.ts';
import { ApiError, call } from './api.ts';
import { dateTime, errorBox, h } from './dom.ts';
import type { Navigate, Stop } from './main.ts';

interface FieldSchema {
  type?: string;
  description?: string;
  default?: unknown;
  enum?: string[];
  anyOf?: FieldSchema[];
  minimum?: number;
  maximum?: number;
  properties?: Record<string, FieldSchema>;
  items?: FieldSchema;
  additionalProperties?: FieldSchema | boolean;
}

/** A field of the form: where it sits in the body (dotted), how its input reads back. */
interface Field {
  name: string;
  schema: FieldSchema;
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  message: HTMLElement;
  /** What the field holds before it is touched (the profile's value, or the default); unset when neither. */
  baseline?: { value: unknown };
  /** The value to send, or undefined to leave the field to its default. */
  read(): unknown;
}

const profilesLink = () => h('a', { href: '/console/profiles', 'data-nav': true }, 'Profiles');

/** The JSON schema of a request body (POST /api/profiles, PATCH /api/profiles/{profile_id}), from the service's own description. */
async function bodySchema(path: string, method: 'post' | 'patch'): Promise<Record<string, FieldSchema>> {
  const response = await fetch('/openapi.json', { credentials: 'same-origin' });
  if (!response.ok) throw new Error(`could not read /openapi.json (${response.status})`);
  const doc = (await response.json()) as { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: FieldSchema }> } }>> };
  const schema = doc.paths[path]?.[method]?.requestBody?.content['application/json']?.schema;
  if (schema?.properties === undefined) throw new Error(`/openapi.json does not describe the body of ${method.toUpperCase()} ${path}`);
  return schema.properties;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** One input for a field of the schema, holding `current` (else the default), with what it reads back as the body's value. */
function field(name: string, schema: FieldSchema, current?: { value: unknown }): Field {
  const id = `field-${name.replace(/\./g, '-')}`;
  const message = h('span', { class: 'field-error', id: `${id}-error`, role: 'alert' });
  const baseline = current ?? ('default' in schema ? { value: schema.default } : undefined);
  const fallback = baseline?.value;
  let input: Field['input'];
  let read: () => unknown;
  if (schema.enum !== undefined) {
    input = h('select', { id, name }, ...schema.enum.map((value) => h('option', { value, selected: value === fallback }, value)));
    read = () => input.value;
  } else if (schema.type === 'boolean') {
    input = h('input', { id, name, type: 'checkbox', checked: fallback === true });
    read = () => (input as HTMLInputElement).checked;
  } else if (schema.type === 'integer' || schema.type === 'number') {
    input = h('input', {
      id,
      name,
      type: 'number',
      inputmode: 'numeric',
      value: fallback === undefined ? undefined : String(fallback),
      min: schema.minimum === undefined ? undefined : String(schema.minimum),
      max: schema.maximum === undefined ? undefined : String(schema.maximum),
    });
    // Sent as typed: the server says what is wrong with a value that is not a whole number.
    read = () => (input.value.trim() === '' ? undefined : Number(input.value));
  } else if (schema.type === 'array') {
    input = h('input', { id, name, value: Array.isArray(fallback) ? fallback.join(' ') : '', placeholder: 'separated by spaces' });
    read = () => input.value.split(/[\s,]+/).filter((item) => item !== '');
  } else if (schema.type === 'object' && typeof schema.additionalProperties === 'object' && schema.additionalProperties.type === 'string') {
    const lines = Object.entries((fallback ?? {}) as Record<string, string>).map(([k, v]) => `${k}=${v}`);
    input = h('textarea', { id, name, rows: '2', placeholder: 'NAME=value, one per line', spellcheck: 'false' }, lines.join('\n'));
    read = () =>
      Object.fromEntries(
        input.value
          .split('\n')
          .filter((line) => line.trim() !== '')
          .map((line) => (line.includes('=') ? [line.slice(0, line.indexOf('=')).trim(), line.slice(line.indexOf('=') + 1)] : [line.trim(), ''])),
      );
  } else if (schema.type === 'object') {
    input = h('textarea', { id, name, rows: '2', spellcheck: 'false' }, JSON.stringify(fallback ?? {}));
    read = () => {
      try {
        return JSON.parse(input.value === '' ? '{}' : input.value);
      } catch {
        // Sent as text: the server's message says it is not an object.
        return input.value;
      }
    };
  } else {
    input = h('input', { id, name, value: typeof fallback === 'string' ? fallback : undefined, spellcheck: 'false' });
    read = () => (input.value.trim() === '' ? undefined : input.value.trim());
  }
  input.setAttribute('aria-describedby', `${id}-help ${id}-error`);
  return { name, schema, input, message, read, ...(baseline === undefined ? {} : { baseline }) };
}

/** Every field of the schema, an object's own fields flattened under its name (network.egress), holding `values` where given. */
function fieldsOf(properties: Record<string, FieldSchema>, values?: Record<string, unknown>, prefix = ''): Field[] {
  const fields: Field[] = [];
  for (const [name, schema] of Object.entries(properties)) {
    const value = values === undefined || !(name in values) ? undefined : { value: values[name] };
    if (schema.type === 'object' && schema.properties !== undefined) fields.push(...fieldsOf(schema.properties, value?.value as Record<string, unknown> | undefined, `${prefix}${name}.`));
    else fields.push(field(`${prefix}${name}`, schema, value));
  }
  return fields;
}

/** The body: each field changed from what it held (or that held nothing), nested back by its dotted name. */
function bodyOf(fields: Field[]): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const f of fields) {
    const value = f.read();
    if (value === undefined || (f.baseline !== undefined && same(value, f.baseline.value))) continue;
    const path = f.name.split('.');
    let into = body;
    for (const part of path.slice(0, -1)) into = (into[part] ??= {}) as Record<string, unknown>;
    into[path.at(-1) as string] = value;
  }
  return body;
}

/**
 * A profile's form: its fields from the body's schema (holding the profile's values when
 * it edits one), sent by `send`; each validation problem shown beside its field.
 */
function profileForm(main: HTMLElement, label: string, fields: () => Promise<Field[]>, send: (body: Record<string, unknown>) => Promise<Profile>, go: Navigate): void {
  const problem = errorBox();
  const form = h('form', { class: 'card profile-form', 'aria-label': label, novalidate: true });
  main.append(problem.el, form);
  void (async () => {
    let all: Field[];
    try {
      all = await fields();
    } catch (err) {
      problem.show(err);
      return;
    }
    const submit = h('button', { type: 'submit' }, label === 'New profile' ? 'Create profile' : 'Save changes');
    form.append(
      ...all.map((f) =>
        h(
          'div',
          { class: 'field', 'data-field': f.name },
          h('label', { for: f.input.id }, f.name, f.schema.default === undefined || f.schema.type === 'boolean' ? '' : h('span', { class: 'help' }, ` default ${JSON.stringify(f.schema.default)}`)),
          f.input,
          f.schema.description === undefined ? null : h('p', { class: 'help', id: `${f.input.id}-help` }, f.schema.description),
          f.message,
        ),
      ),
      submit,
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      problem.clear();
      for (const f of all) f.message.textContent = '';
      submit.disabled = true;
      try {
        const saved = await send(bodyOf(all));
        go(`/console/profiles/${saved.profile_id}`);
      } catch (err) {
        problem.show(err);
        // Each problem of a validation_error beside its field; the first field gets the focus.
        const errors = err instanceof ApiError ? ((err.body.details as { errors?: { field: string; message: string }[] } | undefined)?.errors ?? []) : [];
        let first: Field | undefined;
        for (const e of errors) {
          const f = all.find((candidate) => candidate.name === e.field) ?? all.find((candidate) => e.field.startsWith(`${candidate.name}.`));
          if (f === undefined) continue;
          f.message.textContent = f.message.textContent === '' ? e.message : `${f.message.textContent}; ${e.message}`;
          first ??= f;
        }
        first?.input.focus();
      } finally {
        submit.disabled = false;
      }
    });
  })();
}

function newProfilePage(main: HTMLElement, go: Navigate): Stop {
  main.append(h('p', { class: 'crumbs' }, profilesLink(), ' / new'), h('h1', {}, 'New profile'));
  profileForm(main, 'New profile', async () => fieldsOf(await bodySchema('/api/profiles', 'post')), (body) => call<Profile>('POST', '/api/profiles', body), go);
  return () => {};
}

function editProfilePage(main: HTMLElement, profileId: string, go: Navigate): Stop {
  const path = `/api/profiles/${encodeURIComponent(profileId)}`;
  const title = h('h1', {}, 'Edit profile');
  main.append(h('p', { class: 'crumbs' }, profilesLink(), ' / ', h('a', { href: `/console/profiles/${encodeURIComponent(profileId)}`, 'data-nav': true }, profileId.slice(0, 8)), ' / edit'), title);
  profileForm(
    main,
    'Edit profile',
    async () => {
      const [schema, profile] = await Promise.all([bodySchema('/api/profiles/{profile_id}', 'patch'), call<Profile>('GET', path)]);
      title.textContent = `Edit profile ${profile.name}`;
      return fieldsOf(schema, profile as unknown as Record<string, unknown>);
    },
    (body) => call<Profile>('PATCH', path, body),
    go,
  );
  return () => {};
}

function profilePage(main: HTMLElement, profileId: string, go: Navigate): Stop {
  const problem = errorBox();
  const facts = h('dl', { class: 'facts' });
  const title = h('h1', {}, 'Profile');
  const remove = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      onclick: async () => {
        if (!confirm(`Delete the profile ${title.textContent}?`)) return;
        problem.clear();
        try {
          await call('DELETE', `/api/profiles/${encodeURIComponent(profileId)}`);
          go('/console/profiles');
        } catch (err) {
          problem.show(err);
        }
      },
    },
    'Delete profile',
  );
  main.append(
    h('p', { class: 'crumbs' }, profilesLink(), ' / ', profileId.slice(0, 8)),
    title,
    h(
      'div',
      { class: 'actions' },
      h('a', { href: `/console/instances?profile=${encodeURIComponent(profileId)}`, 'data-nav': true }, 'Its instances'),
      h('a', { href: `/console/profiles/${encodeURIComponent(profileId)}/edit`, 'data-nav': true, class: 'button' }, 'Edit'),
      remove,
    ),
    problem.el,
    h('section', { class: 'card', 'aria-label': 'Fields' }, facts),
  );
  void (async () => {
    try {
      const profile = await call<Profile>('GET', `/api/profiles/${encodeURIComponent(profileId)}`);
      title.textContent = profile.name;
      facts.replaceChildren(
        ...Object.entries(profile).flatMap(([name, value]) => [
          h('dt', {}, name),
          h('dd', {}, typeof value === 'object' && value !== null ? h('code', {}, JSON.stringify(value)) : name.endsWith('_at') ? dateTime(String(value)) : String(value)),
        ]),
      );
    } catch (err) {
      problem.show(err);
      remove.hidden = true;
    }
  })();
  return () => {};
}

function profilesList(main: HTMLElement): Stop {
  const problem = errorBox();
  const body = h('tbody');
  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Profiles'), h('a', { href: '/console/profiles/new', 'data-nav': true, class: 'button' }, 'New profile')),
    problem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Profiles' }, h('thead', {}, h('tr', {}, ...['Name', 'Image', 'Memory', 'vCPUs', 'Disk', 'Egress', 'Warm pool', 'Created'].map((c) => h('th', { scope: 'col' }, c)))), body),
    ),
  );
  void (async () => {
    try {
      const { profiles } = await call<{ profiles: Profile[] }>('GET', '/api/profiles');
      body.replaceChildren(
        ...profiles.map((p) =>
          h(
            'tr',
            { 'data-profile-id': p.profile_id },
            h('td', {}, h('a', { href: `/console/profiles/${p.profile_id}`, 'data-nav': true }, p.name)),
            h('td', {}, p.image),
            h('td', { class: 'num' }, `${p.memory_mb} MB`),
            h('td', { class: 'num' }, String(p.vcpus)),
            h('td', { class: 'num' }, `${p.disk_mb} MB`),
            h('td', {}, p.network.egress),
            h('td', { class: 'num' }, p.warm_pool === 0 ? '—' : `${p.warm_pool_instances.ready}/${p.warm_pool}`),
            h('td', {}, dateTime(p.created_at)),
          ),
        ),
      );
    } catch (err) {
      problem.show(err);
    }
  })();
  return () => {};
}

/** Routes /console/profiles, /console/profiles/new, /console/profiles/{id} and /console/profiles/{id}/edit. */
export function profilesPage(main: HTMLElement, rest: string, go: Navigate): Stop {
  if (rest === '') return profilesList(main);
  if (rest === 'new') return newProfilePage(main, go);
  if (rest.endsWith('/edit')) return editProfilePage(main, decodeURIComponent(rest.slice(0, -'/edit'.length)), go);
  return profilePage(main, decodeURIComponent(rest), go);
}
