// The file browser of a room's instance: a directory's entries (GET …/files?path=),
// a file viewed as text or as an image (GET …/file/{path}, whose JSON carries binary
// content as base64, so an image shows from a data: URL the page's CSP allows), and a
// file downloaded, uploaded or deleted through the same file endpoints a script uses.
// Downloads are read with the session (?raw=1) rather than the public raw URL, which a
// profile may not serve.
import type { FileContent, FileWritten } from '../../sdk/src/generated/api.ts';
import { call, download, filePath, roomPath, upload } from './api.ts';
import { dateTime, errorBox, h } from './dom.ts';

interface Entry {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  mode: string;
  mtime: string;
}

interface Listing {
  path: string;
  entries: Entry[];
  truncated: boolean;
}

/** Files larger than this are offered for download rather than shown. */
const VIEW_MAX_BYTES = 2 * 1024 * 1024;

const join = (dir: string, name: string) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);
const parentOf = (path: string) => (path.lastIndexOf('/') <= 0 ? '/' : path.slice(0, path.lastIndexOf('/')));

function sizeText(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Hands a blob to the browser as a download under its file's name. */
function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = h('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export interface FileBrowser {
  el: HTMLElement;
  /** Shows a file (its directory listed beside it), as a link from the command history does. */
  open(path: string): void;
  /** Lists the directory in view again. */
  reload(): void;
}

export function fileBrowser(profileId: string, roomId: string): FileBrowser {
  let dir = '';
  const problem = errorBox();
  const where = h('input', { id: 'files-path', name: 'path', type: 'text', spellcheck: 'false', placeholder: 'the home directory', 'aria-label': 'Directory' });
  const body = h('tbody');
  const note = h('p', { class: 'help', hidden: true });
  const viewer = h('section', { class: 'viewer', 'aria-label': 'File', hidden: true });
  const picker = h('input', { id: 'files-upload', type: 'file', multiple: true });

  async function list(path: string): Promise<void> {
    problem.clear();
    try {
      const q = path === '' ? '' : `?${new URLSearchParams({ path })}`;
      const listing = await call<Listing>('GET', roomPath(profileId, roomId, `/files${q}`));
      dir = listing.path;
      where.value = dir;
      draw(listing);
    } catch (err) {
      problem.show(err);
    }
  }

  function draw(listing: Listing): void {
    const rows = listing.entries.map((entry) => {
      const path = join(listing.path, entry.name);
      const name =
        entry.type === 'directory'
          ? h('button', { type: 'button', class: 'link', onclick: () => void list(path) }, `${entry.name}/`)
          : entry.type === 'file'
            ? h('button', { type: 'button', class: 'link', onclick: () => void view(path) }, entry.name)
            : h('span', {}, entry.name);
      const actions =
        entry.type === 'file' || entry.type === 'symlink'
          ? h(
              'td',
              { class: 'row-actions' },
              entry.type === 'file' ? h('button', { type: 'button', class: 'secondary small', 'aria-label': `Download ${entry.name}`, onclick: () => void fetchFile(path, entry.name) }, 'Download') : null,
              h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete ${entry.name}`, onclick: () => void remove(path) }, 'Delete'),
            )
          : h('td', {});
      return h(
        'tr',
        { 'data-name': entry.name, 'data-type': entry.type },
        h('td', {}, name),
        h('td', {}, entry.type),
        h('td', { class: 'num' }, entry.type === 'file' ? sizeText(entry.size) : ''),
        h('td', { title: dateTime(entry.mtime) }, dateTime(entry.mtime)),
        h('td', {}, h('code', {}, entry.mode)),
        actions,
      );
    });
    if (listing.path !== '/') {
      rows.unshift(h('tr', {}, h('td', { colspan: '6' }, h('button', { type: 'button', class: 'link', onclick: () => void list(parentOf(listing.path)) }, '../ (up)'))));
    }
    if (listing.entries.length === 0) rows.push(h('tr', {}, h('td', { colspan: '6', class: 'empty' }, 'This directory is empty.')));
    body.replaceChildren(...rows);
    note.hidden = !listing.truncated;
    note.textContent = 'Only the first 10,000 entries are listed.';
  }

  async function view(path: string): Promise<void> {
    problem.clear();
    try {
      const file = await call<FileContent>('GET', filePath(profileId, roomId, path));
      const name = path.slice(path.lastIndexOf('/') + 1);
      let shown: HTMLElement;
      if (file.size > VIEW_MAX_BYTES) shown = h('p', { class: 'help' }, `${sizeText(file.size)}: too large to show here; download it.`);
      else if (file.mime_type.startsWith('image/') && file.mime_type !== 'image/svg+xml') {
        const data = file.encoding === 'base64' ? file.content : btoa(String.fromCodePoint(...new TextEncoder().encode(file.content)));
        shown = h('img', { src: `data:${file.mime_type};base64,${data}`, alt: `${name} (${file.mime_type})` });
      } else if (file.encoding === 'utf-8') shown = h('pre', { class: 'file-text', tabindex: '0', 'aria-label': 'Content' }, file.content);
      else shown = h('p', { class: 'help' }, `Binary content (${file.mime_type}): download it to open it.`);
      viewer.hidden = false;
      viewer.replaceChildren(
        h(
          'div',
          { class: 'title' },
          h('h3', {}, file.file_path),
          h('span', { class: 'updated' }, `${sizeText(file.size)} · ${file.mime_type}`),
          h('button', { type: 'button', class: 'secondary small', onclick: () => void fetchFile(file.file_path, name) }, 'Download'),
          h('button', { type: 'button', class: 'secondary small', onclick: () => ((viewer.hidden = true), viewer.replaceChildren()) }, 'Close'),
        ),
        shown,
      );
    } catch (err) {
      problem.show(err);
    }
  }

  async function fetchFile(path: string, name: string): Promise<void> {
    problem.clear();
    try {
      save(await download(filePath(profileId, roomId, path)), name);
    } catch (err) {
      problem.show(err);
    }
  }

  async function remove(path: string): Promise<void> {
    if (!confirm(`Delete ${path}?`)) return;
    problem.clear();
    try {
      await call('DELETE', filePath(profileId, roomId, path));
      if (viewer.querySelector('h3')?.textContent === path) viewer.hidden = true;
      await list(dir);
    } catch (err) {
      problem.show(err);
    }
  }

  async function put(files: FileList): Promise<void> {
    problem.clear();
    try {
      for (const file of Array.from(files)) await upload<FileWritten>(filePath(profileId, roomId, join(dir, file.name)), file);
      picker.value = '';
      await list(dir);
    } catch (err) {
      problem.show(err);
    }
  }
  picker.addEventListener('change', () => {
    if (picker.files !== null && picker.files.length > 0) void put(picker.files);
  });

  const el = h(
    'section',
    { class: 'card', 'aria-label': 'Files' },
    h(
      'form',
      { class: 'filters', onsubmit: (event: Event) => (event.preventDefault(), void list(where.value.trim())) },
      h('label', { for: 'files-path' }, 'Directory'),
      where,
      h('button', { type: 'submit', class: 'secondary' }, 'List'),
      h('label', { for: 'files-upload' }, 'Upload into it'),
      picker,
    ),
    problem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Directory entries' }, h('thead', {}, h('tr', {}, ...['Name', 'Type', 'Size', 'Modified', 'Mode', ''].map((c) => h('th', { scope: 'col' }, c)))), body),
    ),
    note,
    viewer,
  );
  return {
    el,
    open(path: string) {
      el.scrollIntoView({ block: 'start' });
      void list(parentOf(path)).then(() => view(path));
    },
    reload() {
      void list(dir);
    },
  };
}
