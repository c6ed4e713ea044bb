// Builds the web console into console/dist/: its script and styles bundled by esbuild
// (xterm.js included: the page loads nothing from another host), and its one page.
// scripts/setup runs it; the server serves what it writes (src/adapters/console/pages.ts).
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const dist = here('./dist/');

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await build({
  // The script imports its styles, so esbuild writes console.css beside console.js.
  entryPoints: { console: here('./src/main.ts') },
  outdir: dist,
  bundle: true,
  format: 'esm',
  target: ['chrome120', 'firefox120', 'safari17'],
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  logLevel: 'warning',
});
copyFileSync(here('./index.html'), `${dist}index.html`);
