// A room's command history (GET …/commands, newest first, of all its instances): each
// command's state, exit code, why it ended and how many files it changed; opened, its
// output and files_changed (GET …/commands/{id}, while the service keeps them), each
// file opened in the file browser; and undo (POST …/commands/{id}/revert), which the
// server refuses, with the reason shown, for a command that kept no undo point.
import type { CommandRecord, CommandStatus, FileChange, RevertResult } from '../../sdk/src/generated/api.ts';
import { ApiError, call, roomPath } from './api.ts';
import { clock, dateTime, errorBox, h } from './dom.ts';

const PAGE = 20;

export interface CommandHistory {
  el: HTMLElement;
  reload(): void;
}

function changeList(files: FileChange[], total: number, openFile: (path: string) => void): HTMLElement {
  const list = h(
    'ul',
    { class: 'files', 'aria-label': 'Files changed' },
    ...files.map((file) =>
      h(
        'li',
        { 'data-status': file.status },
        h('span', { class: `change change-${file.status}` }, file.status),
        file.status === 'deleted' ? h('span', {}, file.path) : h('button', { type: 'button', class: 'link', onclick: () => openFile(file.path) }, file.path),
        file.size === undefined ? null : h('span', { class: 'size' }, `${file.size} B`),
      ),
    ),
  );
  if (files.length === 0) list.append(h('li', { class: 'help' }, 'No file changed.'));
  else if (total > files.length) list.append(h('li', { class: 'help' }, `and ${total - files.length} more`));
  return list;
}

export function commandHistory(profileId: string, roomId: string, currentInstance: () => string | undefined, openFile: (path: string) => void): CommandHistory {
  const problem = errorBox();
  const body = h('div', { class: 'history' });
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older commands');
  let cursor: string | null = null;

  function detail(record: CommandRecord, into: HTMLElement): void {
    const shown = errorBox();
    const output = h('pre', { class: 'output', 'aria-label': 'Command output', tabindex: '0' });
    const files = h('div', {});
    const undoResult = h('p', { class: 'outcome', role: 'status' });
    const undo = h(
      'button',
      {
        type: 'button',
        class: 'secondary',
        hidden: record.state === 'running' || record.instance_id !== currentInstance(),
        onclick: async () => {
          shown.clear();
          undoResult.textContent = '';
          undo.disabled = true;
          try {
            let reverted: RevertResult;
            try {
              reverted = await call<RevertResult>('POST', roomPath(profileId, roomId, `/commands/${record.command_id}/revert`), {});
            } catch (err) {
              // Later commands changed the same files: the server names them; undoing over them is the person's choice.
              if (!(err instanceof ApiError && err.body.error === 'revert_conflict' && confirm(`${err.body.message}\n\nUndo anyway, over those later changes?`))) throw err;
              reverted = await call<RevertResult>('POST', roomPath(profileId, roomId, `/commands/${record.command_id}/revert`), { force: true });
            }
            undoResult.textContent = `Undone: ${reverted.files_changed_total} file${reverted.files_changed_total === 1 ? '' : 's'} put back in ${reverted.duration_ms} ms`;
            undoResult.after(changeList(reverted.files_changed, reverted.files_changed_total, openFile));
          } catch (err) {
            shown.show(err);
          } finally {
            undo.disabled = false;
          }
        },
      },
      'Undo this command',
    );
    into.replaceChildren(h('p', { class: 'help' }, 'loading…'));
    void (async () => {
      try {
        const status = await call<CommandStatus>('GET', roomPath(profileId, roomId, `/commands/${record.command_id}`));
        output.textContent = status.output_available ? status.output : '';
        const kept = status.output_available
          ? [output, h('h4', {}, 'Files changed'), files]
          : [h('p', { class: 'help' }, 'Its output and files_changed are no longer kept (15 minutes after it ended, or across a restart of the service).')];
        if (status.files_changed !== null) files.replaceChildren(changeList(status.files_changed, status.files_changed_total ?? 0, openFile));
        into.replaceChildren(...kept, h('div', { class: 'actions' }, undo), shown.el, undoResult);
      } catch (err) {
        into.replaceChildren(shown.el);
        shown.show(err);
      }
    })();
  }

  function item(record: CommandRecord): HTMLElement {
    const details = h('div', { class: 'command-detail' });
    const outcome =
      record.state === 'running'
        ? 'running'
        : `exit code ${record.exit_code ?? '—'} · ${record.end_reason ?? record.state}${record.duration_ms === null ? '' : ` · ${record.duration_ms} ms`} · ${record.files_changed_total ?? 0} file${record.files_changed_total === 1 ? '' : 's'} changed`;
    const el = h(
      'details',
      { class: 'command-record', 'data-command-id': record.command_id, 'data-exit-code': record.exit_code === null ? undefined : String(record.exit_code) },
      h(
        'summary',
        {},
        h('time', { datetime: record.started_at, title: dateTime(record.started_at) }, clock(record.started_at)),
        h('code', {}, record.command),
        h('span', { class: 'updated' }, outcome),
        record.instance_id === currentInstance() ? null : h('span', { class: 'updated' }, '(an earlier instance of the room)'),
      ),
      details,
    );
    el.addEventListener('toggle', () => {
      if (el.open && details.childElementCount === 0) detail(record, details);
    });
    return el;
  }

  async function load(append: boolean): Promise<void> {
    problem.clear();
    try {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (append && cursor !== null) q.set('cursor', cursor);
      const page = await call<{ commands: CommandRecord[]; next_cursor: string | null }>('GET', roomPath(profileId, roomId, `/commands?${q}`));
      cursor = page.next_cursor;
      const items = page.commands.map(item);
      if (append) body.append(...items);
      else body.replaceChildren(...items);
      if (body.childElementCount === 0) body.append(h('p', { class: 'help' }, 'No command has run in this room yet.'));
      more.hidden = cursor === null;
    } catch (err) {
      problem.show(err);
    }
  }
  more.addEventListener('click', () => void load(true));

  const el = h(
    'section',
    { class: 'card', 'aria-label': 'Command history' },
    h('p', { class: 'help' }, 'Newest first. Open a command for its output and the files it changed; undo puts those files back, for commands run with keep_undo.'),
    h('button', { type: 'button', class: 'secondary', onclick: () => void load(false) }, 'Refresh history'),
    problem.el,
    body,
    more,
  );
  return { el, reload: () => void load(false) };
}
