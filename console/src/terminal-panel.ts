// A terminal in a room's instance: xterm.js over the REST API's terminal WebSocket. A
// WebSocket carries no custom header, so the panel first gets a single-use ticket
// (POST …/terminal/ticket, with the session) and opens the socket with it.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { call, roomPath } from './api.ts';
import { errorBox, h } from './dom.ts';

interface Control {
  type: string;
  exit_code?: number;
  reason?: string;
  message?: string;
}

export function terminalPanel(profileId: string, roomId: string): { el: HTMLElement; close(): void } {
  const problem = errorBox();
  const status = h('span', { class: 'updated', role: 'status' }, 'closed');
  const screen = h('div', { class: 'terminal', hidden: true });
  let socket: WebSocket | undefined;
  let term: Terminal | undefined;
  let resizeObserver: ResizeObserver | undefined;

  const close = () => {
    socket?.close(1000);
    socket = undefined;
    resizeObserver?.disconnect();
    resizeObserver = undefined;
    term?.dispose();
    term = undefined;
    screen.hidden = true;
    toggle.textContent = 'Open terminal';
  };

  const open = async () => {
    problem.clear();
    status.textContent = 'opening…';
    screen.hidden = false;
    const terminal = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, screenReaderMode: false, theme: { background: '#11151c' } });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(screen);
    fit.fit();
    term = terminal;
    toggle.textContent = 'Close terminal';
    try {
      const { ticket } = await call<{ ticket: string }>('POST', roomPath(profileId, roomId, '/terminal/ticket'));
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
      const q = new URLSearchParams({ ticket, cols: String(terminal.cols), rows: String(terminal.rows) });
      const ws = new WebSocket(`${scheme}://${location.host}${roomPath(profileId, roomId, '/terminal')}?${q}`);
      ws.binaryType = 'arraybuffer';
      socket = ws;
      const encoder = new TextEncoder();
      ws.onmessage = (event) => {
        if (typeof event.data !== 'string') {
          terminal.write(new Uint8Array(event.data as ArrayBuffer));
          return;
        }
        const control = JSON.parse(event.data) as Control;
        if (control.type === 'opened') {
          status.textContent = 'open';
          terminal.focus();
        } else if (control.type === 'exit') status.textContent = `ended: exit code ${control.exit_code}`;
        else if (control.type === 'closed') status.textContent = `closed: ${control.message ?? control.reason}`;
        else if (control.type === 'error') problem.show(new Error(control.message));
      };
      ws.onclose = (event) => {
        if (socket !== ws) return;
        if (status.textContent === 'opening…') problem.show(new Error(`the terminal could not open (WebSocket closed with ${event.code})`));
        else if (status.textContent === 'open') status.textContent = `closed (${event.code})`;
        socket = undefined;
      };
      terminal.onData((data) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(data)));
      terminal.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'resize', cols, rows })));
      resizeObserver = new ResizeObserver(() => fit.fit());
      resizeObserver.observe(screen);
    } catch (err) {
      status.textContent = 'closed';
      problem.show(err);
      close();
    }
  };

  const toggle = h('button', { type: 'button', class: 'secondary', onclick: () => (term === undefined ? void open() : close()) }, 'Open terminal');
  const el = h('section', { class: 'card', 'aria-label': 'Terminal' }, h('div', { class: 'title' }, toggle, status), problem.el, screen);
  return { el, close };
}
