// The box that runs a command in a room's instance: its output as the REST API streams
// it (Server-Sent Events), then its exit code, how long it took, why it ended, and every
// file it created, modified or deleted, each linked to its content. Once it ends, the
// page is told (its history and file browser show what changed).
import type { CommandResult, ErrorBody, FileChange } from '../../sdk/src/generated/api.ts';
import { roomPath, stream } from './api.ts';
import { errorBox, h } from './dom.ts';

function fileRow(file: FileChange): HTMLElement {
  const name = file.public_url !== undefined && file.status !== 'deleted' ? h('a', { href: file.public_url, target: '_blank', rel: 'noopener' }, file.path) : h('span', {}, file.path);
  return h(
    'li',
    { 'data-status': file.status },
    h('span', { class: `change change-${file.status}` }, file.status),
    name,
    file.size === undefined ? null : h('span', { class: 'size' }, `${file.size} B`),
    file.mime_type === undefined ? null : h('span', { class: 'size' }, file.mime_type),
  );
}

export function commandBox(profileId: string, roomId: string, ended: () => void = () => {}): HTMLElement {
  const problem = errorBox();
  const input = h('textarea', { id: 'command', name: 'command', rows: '2', required: true, spellcheck: 'false', placeholder: 'e.g. echo hello > hello.txt && ls' });
  const run = h('button', { type: 'submit' }, 'Run');
  const output = h('pre', { class: 'output', 'aria-label': 'Output', tabindex: '0', hidden: true });
  const outcome = h('p', { class: 'outcome', role: 'status' });
  const files = h('ul', { class: 'files', 'aria-label': 'Files changed' });

  const form = h(
    'form',
    {
      class: 'command',
      'aria-label': 'Run a command',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        const command = input.value;
        if (command.trim() === '') return;
        problem.clear();
        run.disabled = true;
        output.hidden = false;
        output.textContent = '';
        outcome.textContent = 'running…';
        files.replaceChildren();
        try {
          await stream(roomPath(profileId, roomId, '/command'), { command, stream: true }, ({ event: name, data }) => {
            if (name === 'output') output.append((data as { data: string }).data);
            else if (name === 'result') {
              const result = data as CommandResult;
              outcome.textContent = `exit code ${result.result.exit_code} · ${result.duration_ms} ms · ${result.result.end_reason} · ${result.result.files_changed_total} file${result.result.files_changed_total === 1 ? '' : 's'} changed`;
              outcome.dataset.exitCode = String(result.result.exit_code);
              files.replaceChildren(...result.result.files_changed.map(fileRow));
              if (result.result.files_changed_truncated) files.append(h('li', { class: 'help' }, `and ${result.result.files_changed_total - result.result.files_changed.length} more`));
            } else if (name === 'error') {
              outcome.textContent = '';
              problem.show(new Error((data as ErrorBody).message));
            }
          });
        } catch (err) {
          outcome.textContent = '';
          problem.show(err);
        } finally {
          run.disabled = false;
          ended();
        }
      },
    },
    h('label', { for: 'command' }, 'Command (run by sh -c in the home directory; Enter runs it, Shift+Enter adds a line)'),
    input,
    run,
  );
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  return h('section', { class: 'card' }, form, problem.el, output, outcome, files);
}
