// What a tool call answers: content a model reads (text, or an image it can see), whether
// the call failed, and the JSON the mapped endpoint answers. The wording is written for
// a model: what happened, what changed, and how to go on (read more, check a background
// command, use another tool).
import type { CommandResult, CommandStatus } from '../../core/command-schema.ts';
import type { ContextRunResult } from '../../core/context-schema.ts';
import type { DirectoryListing, FileContent } from '../../core/file-schema.ts';
import { formatBytes } from '../../lib/format-size.ts';
import type { InstanceInfo } from './backend.ts';
import { IMAGE_TYPES, MAX_INLINE_IMAGE_BYTES, type ToolLimits } from './definitions.ts';

export type ToolContent = { type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string };

export interface ToolResult {
  /** What the model reads. */
  content: ToolContent[];
  /** The call failed: a non-zero exit code, or an error the arguments caused. */
  isError: boolean;
  /** The JSON the mapped endpoint answers (its Error body on an error; read_file without `content`). */
  structured: unknown;
}

export function commandText(result: CommandResult, url: (relative: string) => string): string {
  const r = result.result;
  const lines: string[] = [];
  lines.push(
    r.timed_out
      ? `Exit code: ${r.exit_code} (the command reached its time limit and was killed)`
      : `Exit code: ${r.exit_code}${r.exit_code === 0 ? '' : ' (failed)'}`,
  );
  if (r.output === '') {
    lines.push('Output: (none)');
  } else {
    lines.push('Output:');
    lines.push(r.output.endsWith('\n') ? r.output.slice(0, -1) : r.output);
  }
  if (r.output_truncated) lines.push(`(The command printed ${r.output_bytes} bytes; the middle was cut, keeping the first and last part.)`);
  // Where the instance keeps the streams apart, say how much of the output was stderr (the API's result has each).
  if (r.stderr_bytes !== null && r.stderr_bytes > 0) {
    lines.push(r.stderr_bytes === r.output_bytes ? '(All of it was written to stderr.)' : `(Of this, ${r.stderr_bytes} bytes were written to stderr, ${r.stdout_bytes ?? 0} to stdout.)`);
  }
  if (r.files_changed_total === 0) {
    lines.push('Files changed: none');
  } else {
    lines.push(`Files changed (${r.files_changed_total}):`);
    for (const change of r.files_changed) {
      const facts = [change.size === undefined ? undefined : `${change.size} bytes`, change.mime_type].filter(Boolean).join(', ');
      lines.push(`${change.status} ${change.path}${facts ? ` (${facts})` : ''}${change.public_url ? ` ${url(change.public_url)}` : ''}`);
    }
    if (r.files_changed_truncated) lines.push(`... and ${r.files_changed_total - r.files_changed.length} more, not listed`);
  }
  return lines.join('\n');
}

/**
 * A run of code for a model: what it printed, each result as text (a table as its text
 * form, a chart with its kind and title), the exception, the files it wrote; each image
 * also as an image the model can see (up to MAX_INLINE_IMAGE_BYTES).
 */
export function codeResult(result: ContextRunResult, url: (relative: string) => string): ToolResult {
  const lines: string[] = [];
  if (result.restarted) lines.push('(The interpreter was started again: variables from earlier calls are gone.)');
  if (result.stdout !== '') lines.push('Output:', result.stdout.replace(/\n$/, ''));
  if (result.stderr !== '') lines.push('Stderr:', result.stderr.replace(/\n$/, ''));
  const images: ToolContent[] = [];
  for (const shown of result.results) {
    const what = shown.chart ? `a ${shown.chart.type} chart${shown.chart.title ? ` "${shown.chart.title}"` : ''}` : undefined;
    const image = shown.png !== undefined ? { data: shown.png, mimeType: 'image/png' } : shown.jpeg !== undefined ? { data: shown.jpeg, mimeType: 'image/jpeg' } : undefined;
    if (image && Buffer.byteLength(image.data, 'base64') <= MAX_INLINE_IMAGE_BYTES) images.push({ type: 'image', ...image });
    const label = shown.is_main_result ? 'Result' : 'Displayed';
    lines.push(`${label}${what ? ` (${what}${image ? ', image attached' : ''})` : image ? ' (image attached)' : ''}:`, shown.text ?? '(no text form)');
  }
  if (result.error) {
    lines.push(
      result.timed_out ? 'Error (the time limit interrupted the code):' : result.interrupted ? 'Error (the code was interrupted):' : 'Error:',
      (result.error.traceback || `${result.error.name}: ${result.error.value}`).replace(/\n$/, ''),
    );
  }
  if (lines.length === 0) lines.push('Ran; it printed nothing and its last line has no value.');
  for (const change of result.files_changed) lines.push(`${change.status} ${change.path}${change.public_url ? ` ${url(change.public_url)}` : ''}`);
  return { content: [{ type: 'text', text: lines.join('\n') }, ...images], isError: result.error !== null, structured: result };
}

/** A command's status for a model: its state, the output since the offset asked for, where to read on. */
export function statusText(status: CommandStatus, url: (relative: string) => string): string {
  const lines: string[] = [];
  const ended = status.state !== 'running';
  lines.push(
    ended
      ? `Command ${status.command_id} has ended: ${status.state}${status.exit_code === null ? '' : `, exit code ${status.exit_code}`}${status.duration_ms === null ? '' : ` after ${(status.duration_ms / 1000).toFixed(1)} s`}.`
      : `Command ${status.command_id} is still running (started ${status.started_at}).`,
  );
  if (!status.output_available) {
    lines.push('Its output is no longer kept (15 minutes after the end, or the server restarted).');
    return lines.join('\n');
  }
  if (status.output === '') lines.push(`No new output from byte ${status.output_offset} (of ${status.output_bytes}).`);
  else {
    lines.push(`Output, bytes ${status.output_offset}-${status.next_offset} of ${status.output_bytes}:`);
    lines.push(status.output.endsWith('\n') ? status.output.slice(0, -1) : status.output);
  }
  if (!ended) lines.push(`Read on with offset ${status.next_offset}.`);
  if (ended && status.files_changed !== null) {
    if (status.files_changed_total === 0) lines.push('Files changed: none');
    else {
      lines.push(`Files changed (${status.files_changed_total}):`);
      for (const change of status.files_changed) lines.push(`${change.status} ${change.path}${change.public_url ? ` ${url(change.public_url)}` : ''}`);
      if (status.files_changed_truncated) lines.push(`... and ${(status.files_changed_total ?? 0) - status.files_changed.length} more, not listed`);
    }
  }
  return lines.join('\n');
}

/** " URL: <link>" after a sentence about a file, when files are linked. */
export function linked(link: string | undefined): string {
  return link === undefined ? '' : ` URL: ${link}`;
}

export function fileResult(
  file: FileContent,
  args: Record<string, unknown>,
  limits: ToolLimits,
  fileLink: (instanceId: string, path: string, pathEncoding?: 'percent') => string | undefined,
): ToolResult {
  const { content, ...meta } = file;
  const structured = meta;
  const where = linked(fileLink(file.instance_id, file.file_path, file.path_encoding));
  if (file.encoding === 'base64') {
    if (IMAGE_TYPES.has(file.mime_type) && file.size <= MAX_INLINE_IMAGE_BYTES) {
      return {
        content: [
          { type: 'text', text: `Image ${file.file_path} (${file.mime_type}, ${file.size} bytes).${where}` },
          { type: 'image', data: content, mimeType: file.mime_type },
        ],
        isError: false,
        structured,
      };
    }
    const why = IMAGE_TYPES.has(file.mime_type) ? `an image larger than ${formatBytes(MAX_INLINE_IMAGE_BYTES)}` : 'binary';
    return {
      content: [
        {
          type: 'text',
          text: `${file.file_path} is ${why} (${file.mime_type}, ${file.size} bytes) and is not shown.${where}\nInspect it with run_command (e.g. \`file\`, \`xxd ${file.file_path} | head\`).`,
        },
      ],
      isError: false,
      structured,
    };
  }
  if (content === '') return { content: [{ type: 'text', text: `${file.file_path} is empty (0 bytes).` }], isError: false, structured };

  // Lines keep their terminators, so the selection is the exact bytes of the file.
  const lines = content.split(/(?<=\n)/);
  const offset = typeof args.offset === 'number' ? args.offset : 1;
  const limit = typeof args.limit === 'number' ? args.limit : lines.length;
  if (offset > lines.length) {
    return {
      content: [{ type: 'text', text: `Error: ${file.file_path} has ${lines.length} line(s); offset ${offset} is past its end.` }],
      isError: true,
      structured,
    };
  }
  const chosen = lines.slice(offset - 1, offset - 1 + limit);
  let text = '';
  let bytes = 0;
  let taken = 0;
  for (const line of chosen) {
    const n = Buffer.byteLength(line);
    if (bytes + n > limits.maxOutputBytes) break;
    text += line;
    bytes += n;
    taken++;
  }
  let cutLine = false;
  if (taken === 0) {
    // One line longer than the whole budget: its start, cut on a character boundary.
    text = new TextDecoder().decode(Buffer.from(chosen[0] ?? '').subarray(0, limits.maxOutputBytes)).replace(/\uFFFD$/, '');
    taken = 1;
    cutLine = true;
  }
  const last = offset - 1 + taken;
  const result: ToolContent[] = [{ type: 'text', text }];
  if (cutLine) {
    result.push({
      type: 'text',
      text: `[Line ${offset} of ${lines.length} is longer than ${formatBytes(limits.maxOutputBytes)}; only its start is shown. Read the rest with run_command (e.g. \`cut -c\`, \`head -c\`).]`,
    });
  } else if (taken < chosen.length) {
    result.push({
      type: 'text',
      text: `[Lines ${offset}-${last} of ${lines.length}: one read returns at most ${formatBytes(limits.maxOutputBytes)}. Read on with offset=${last + 1}.]`,
    });
  } else if (offset > 1 || last < lines.length) {
    result.push({ type: 'text', text: `[Lines ${offset}-${last} of ${lines.length}.]` });
  }
  return { content: result, isError: false, structured };
}

export function listingText(listing: DirectoryListing): string {
  if (listing.entries.length === 0) return `${listing.path} is empty.`;
  const width = Math.max(...listing.entries.map((e) => String(e.size).length));
  const lines = [`${listing.path} (${listing.entries.length} entries):`];
  for (const e of listing.entries) {
    lines.push(`${e.type.padEnd(9)} ${String(e.size).padStart(width)} ${e.mode.padStart(4, '0')} ${e.mtime} ${e.name}${e.type === 'directory' ? '/' : ''}`);
  }
  if (listing.truncated) lines.push(`(only the first ${listing.entries.length} entries are listed; use run_command with ls or find to see the rest)`);
  return lines.join('\n');
}

export function instanceText(info: InstanceInfo): string {
  const { instance, profile } = info;
  const lines = [`Machine ${instance.instance_id} (profile "${profile.name}") is ${instance.state}.`];
  if (instance.state === 'failed' && instance.failure_reason) lines.push(`Why it failed: ${instance.failure_reason}`);
  if (instance.state === 'paused' || instance.state === 'pausing' || instance.state === 'resuming') {
    const kept = instance.pause?.memory_kept ? 'its files and running programs are kept' : 'its files are kept, but programs that were running have ended';
    lines.push(`It is paused or pausing: ${kept}. The next command or file operation resumes it (about a second).`);
  } else if (instance.state !== 'ready' && instance.state !== 'failed' && instance.state !== 'stopped') {
    lines.push(instance.progress ? `Now: ${instance.progress}` : 'It is still being created; ask again shortly.');
  }
  lines.push(
    `Image: ${profile.image}. User: ${profile.user} (sudo without a password). Home and working directory: ${profile.home}.`,
    `Commands time out after ${profile.commandTimeoutS} s. Network: ${profile.egress === 'internet' ? 'internet access' : profile.egress === 'allowlist' ? 'only the hosts the profile allows' : 'none'}.`,
    `Memory ${instance.resources.memory_mb} MiB, ${instance.resources.vcpus} CPU(s), disk ${instance.resources.disk_mb} MiB.`,
  );
  return lines.join('\n');
}
