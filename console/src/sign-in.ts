// The sign-in view: an API key, traded at once for a session cookie. The key goes no
// further than that one request: the page keeps neither it nor anything from it.
import { type Session, signIn } from './api.ts';
import { errorBox, h } from './dom.ts';

export function signInPage(main: HTMLElement, notice: string | undefined, signedIn: (session: Session) => void): void {
  const problem = errorBox();
  const key = h('input', { id: 'api-key', name: 'api_key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'rk_live_…' });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'card',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        problem.clear();
        button.disabled = true;
        try {
          const session = await signIn(key.value);
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
    h('label', { for: 'api-key' }, 'API key'),
    key,
    h('p', { class: 'help' }, 'A key of your organization (roomkit keys create). The console keeps a session cookie, not the key; the session lasts 12 hours, or until you sign out or the key is revoked.'),
    problem.el,
    button,
  );
  main.append(form);
  key.focus();
}
