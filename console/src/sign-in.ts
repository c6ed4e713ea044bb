// The sign-in view: an API key (or, ticked, the operator token), traded at once for a
// session cookie. The secret goes no further than that one request: the page keeps
// neither it nor anything from it.
import { type Session, signIn } from './api.ts';
import { errorBox, h } from './dom.ts';

export function signInPage(main: HTMLElement, notice: string | undefined, signedIn: (session: Session) => void): void {
  const problem = errorBox();
  const key = h('input', { id: 'api-key', name: 'api_key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'rk_live_…' });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const label = h('label', { for: 'api-key' }, 'API key');
  const keyHelp = 'A key of your organization (roomkit keys create). The console keeps a session cookie, not the key; the session lasts 12 hours, or until you sign out or the key is revoked.';
  const operatorHelp = 'The server’s ROOMKIT_OPERATOR_TOKEN: its pages show the host, the nodes and organizations’ quotas, not an organization’s instances. The session lasts 12 hours, or until you sign out or the token changes.';
  const help = h('p', { class: 'help' }, keyHelp);
  const operator = h('input', { id: 'as-operator', type: 'checkbox' });
  operator.addEventListener('change', () => {
    label.textContent = operator.checked ? 'Operator token' : 'API key';
    help.textContent = operator.checked ? operatorHelp : keyHelp;
    key.placeholder = operator.checked ? 'ROOMKIT_OPERATOR_TOKEN' : 'rk_live_…';
    key.focus();
  });
  const form = h(
    'form',
    {
      class: 'card',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        problem.clear();
        button.disabled = true;
        try {
          const session = await signIn(key.value, operator.checked);
          key.value = '';
          signedIn(session);
        } catch (err) {
          problem.show(err);
          key.focus();
        } finally {
          button.disabled = false;
        }
      },
    },
    h('h1', {}, 'roomkit console'),
    notice === undefined ? null : h('p', { class: 'notice', role: 'status' }, notice),
    label,
    key,
    h('label', { for: 'as-operator', class: 'check' }, operator, ' Sign in as the operator (the server’s operator token)'),
    help,
    problem.el,
    button,
  );
  main.append(form);
  key.focus();
}
