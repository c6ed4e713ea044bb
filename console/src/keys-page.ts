// The organization's API keys (/console/keys): the list (never the keys themselves),
// a form that creates one and shows it this once, and revoke. Revoking the key this
// session was made with ends the session, so the page says so before it is done.
import type { ApiKey, CreatedApiKey } from '../../sdk/src/generated/api.ts';
import { call, type Session } from './api.ts';
import { dateTime, errorBox, h, relative } from './dom.ts';
import type { Stop } from './main.ts';

export function keysPage(main: HTMLElement, session: Session & { kind: 'key' }): Stop {
  const problem = errorBox();
  const body = h('tbody');
  const made = h('section', { class: 'card secret', 'aria-label': 'New key', hidden: true });
  const name = h('input', { id: 'key-name', name: 'name', maxlength: '100', placeholder: 'e.g. ci' });
  const env = h('select', { id: 'key-env', name: 'env' }, ...['live', 'test'].map((value) => h('option', { value, selected: value === session.env }, value)));
  const createProblem = errorBox();

  async function reload(): Promise<void> {
    problem.clear();
    try {
      const { keys } = await call<{ keys: ApiKey[] }>('GET', '/api/keys');
      body.replaceChildren(
        ...keys.map((k) =>
          h(
            'tr',
            { 'data-key-id': k.key_id },
            h('td', {}, k.name ?? '—', k.key_id === session.key_id ? h('span', { class: 'help' }, ' (this session’s)') : null),
            h('td', {}, h('code', {}, `${k.prefix}…`)),
            h('td', {}, k.env),
            h('td', { title: k.created_at }, dateTime(k.created_at)),
            h('td', {}, k.last_used_at === null ? 'never' : relative(k.last_used_at)),
            h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': `Revoke ${k.name ?? k.prefix}`, onclick: () => void revoke(k) }, 'Revoke')),
          ),
        ),
      );
    } catch (err) {
      problem.show(err);
    }
  }

  async function revoke(key: ApiKey): Promise<void> {
    const own = key.key_id === session.key_id;
    if (!confirm(`Revoke the key ${key.name ?? key.prefix}? Every request made with it is refused from now on.${own ? ' It is the key this console session was made with: you will be signed out.' : ''}`)) return;
    problem.clear();
    try {
      await call('DELETE', `/api/keys/${key.key_id}`);
      await reload();
    } catch (err) {
      problem.show(err);
    }
  }

  const form = h(
    'form',
    {
      class: 'create',
      'aria-label': 'Create a key',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        createProblem.clear();
        try {
          const key = await call<CreatedApiKey>('POST', '/api/keys', { env: env.value, ...(name.value.trim() === '' ? {} : { name: name.value.trim() }) });
          name.value = '';
          const secret = h('input', { id: 'new-key', readonly: true, value: key.api_key, size: '44', spellcheck: 'false', 'aria-label': 'The new key' });
          made.hidden = false;
          made.replaceChildren(
            h('h2', {}, `Key ${key.name ?? key.prefix} created`),
            h('p', { class: 'notice', role: 'status' }, 'Copy it now: this is the only time it is shown. roomkit keeps only a hash of it.'),
            secret,
            h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                onclick: async () => {
                  secret.select();
                  await navigator.clipboard?.writeText(key.api_key).catch(() => undefined);
                },
              },
              'Copy',
            ),
            h('button', { type: 'button', class: 'secondary', onclick: () => ((made.hidden = true), made.replaceChildren()) }, 'Done'),
          );
          secret.select();
          await reload();
        } catch (err) {
          createProblem.show(err);
        }
      },
    },
    h('label', { for: 'key-name' }, 'Name'),
    name,
    h('label', { for: 'key-env' }, 'Environment'),
    env,
    h('button', { type: 'submit' }, 'Create key'),
    createProblem.el,
  );

  main.append(
    h('h1', {}, 'API keys'),
    h('p', { class: 'help' }, 'The keys of the organization that are not revoked. A key itself is shown once, when it is created.'),
    made,
    h('section', { class: 'card' }, form),
    problem.el,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'API keys' }, h('thead', {}, h('tr', {}, ...['Name', 'Prefix', 'Env', 'Created', 'Last used', ''].map((c) => h('th', { scope: 'col' }, c)))), body)),
  );
  void reload();
  return () => {};
}
