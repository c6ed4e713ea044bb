// The shapes of code contexts as the API takes and gives them (…/contexts and a run in
// one): the one source of their fields, types and OpenAPI.
import Type from 'typebox';
import { FileChange } from './command-schema.ts';

/** Languages a context speaks. */
export const CONTEXT_LANGUAGES = ['python', 'javascript', 'bash'] as const;
export type ContextLanguage = (typeof CONTEXT_LANGUAGES)[number];
/** Largest cell a run takes, in UTF-8 bytes. */
export const MAX_CODE_BYTES = 1024 * 1024;

const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';
const Env = (description: string) =>
  Type.Record(Type.String(), Type.String({ maxLength: 32768 }), { propertyNames: { pattern: ENV_NAME_PATTERN, maxLength: 128 }, maxProperties: 100, description });

export const ContextCreate = Type.Object(
  {
    language: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: `The interpreter: ${CONTEXT_LANGUAGES.map((l, i) => `\`${l}\`${i === 0 ? ' (the default)' : ''}`).join(', ')}` })),
    cwd: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'Working directory of the interpreter, absolute or relative to the home (default: the home); it must exist' })),
    env: Type.Optional(Env('Environment variables of the interpreter, over the profile\'s and the instance\'s')),
  },
  { additionalProperties: false, title: 'ContextCreate' },
);
export type ContextCreate = Type.Static<typeof ContextCreate>;

export const Context = Type.Object(
  {
    context_id: Type.String({ format: 'uuid' }),
    language: Type.String({ description: 'The interpreter it runs: `python`, `javascript` or `bash`' }),
    cwd: Type.String({ description: 'Its working directory (absolute)' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'Context' },
);
export type Context = Type.Static<typeof Context>;

export const ContextList = Type.Object({ contexts: Type.Array(Context, { description: 'The instance\'s contexts, oldest first' }) }, { title: 'ContextList' });
export type ContextList = Type.Static<typeof ContextList>;

export const ContextRunRequest = Type.Object(
  {
    code: Type.String({ maxLength: MAX_CODE_BYTES, description: `The code to run, like a notebook cell: its last expression's value is the main result; at most ${MAX_CODE_BYTES} bytes` }),
    env: Type.Optional(Env('Environment variables for this run only (os.environ has them while it runs)')),
    timeout_s: Type.Optional(Type.Integer({ minimum: 1, description: 'Time limit, seconds; default and maximum: the profile\'s command_timeout_s. At the limit the code is interrupted' })),
    stream: Type.Optional(Type.Boolean({ description: 'Answer with Server-Sent Events as the code runs (as `Accept: text/event-stream` does)' })),
  },
  { additionalProperties: false, title: 'ContextRunRequest' },
);
export type ContextRunRequest = Type.Static<typeof ContextRunRequest>;

/** A chart's data, from a matplotlib figure: what a client can redraw or read without the image. */
export const ChartData = Type.Object(
  {
    type: Type.String({
      description: '`line`, `scatter`, `bar`, `pie`, `box_and_whisker`, `superchart` (a figure of several plots: `elements` are their charts) or `unknown`',
    }),
    title: Type.Union([Type.String(), Type.Null()]),
    x_label: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    y_label: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    x_unit: Type.Optional(Type.Union([Type.String({ description: 'The unit written at the end of the label, `(s)` or `[m]`' }), Type.Null()])),
    y_unit: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    x_scale: Type.Optional(Type.String({ description: 'Line and scatter: matplotlib\'s scale (`linear`, `log`, `symlog`, `logit`, …), or `datetime` and `categorical` by the axis\'s values' })),
    y_scale: Type.Optional(Type.String()),
    x_ticks: Type.Optional(Type.Array(Type.Union([Type.Number(), Type.String()]), { description: 'Line and scatter: tick positions (dates as ISO 8601 text, categories as their text)' })),
    y_ticks: Type.Optional(Type.Array(Type.Union([Type.Number(), Type.String()]))),
    x_tick_labels: Type.Optional(Type.Array(Type.String(), { description: 'Line and scatter: the ticks\' text as drawn' })),
    y_tick_labels: Type.Optional(Type.Array(Type.String())),
    elements: Type.Array(Type.Unknown(), {
      description:
        'line and scatter: `{label, points: [[x, y], …]}` per series; bar: `{label, group, value}` per bar; pie: `{label, angle, radius}` per wedge; box_and_whisker: `{label, min, first_quartile, median, third_quartile, max, outliers}` per box; superchart: a chart per plot',
    }),
  },
  { additionalProperties: true, title: 'ChartData' },
);

export const DisplayResult = Type.Object(
  {
    is_main_result: Type.Boolean({ description: 'The value of the cell\'s last expression (else a display() call or a figure)' }),
    text: Type.Optional(Type.String({ description: 'Its repr()' })),
    html: Type.Optional(Type.String()),
    markdown: Type.Optional(Type.String()),
    svg: Type.Optional(Type.String()),
    png: Type.Optional(Type.String({ description: 'Base64' })),
    jpeg: Type.Optional(Type.String({ description: 'Base64' })),
    latex: Type.Optional(Type.String()),
    json: Type.Optional(Type.Unknown()),
    javascript: Type.Optional(Type.String()),
    chart: Type.Optional(ChartData),
    path: Type.Optional(Type.String({ description: 'Where the run wrote its image in the instance (png or jpeg results): also in the run\'s files_changed' })),
  },
  { additionalProperties: false, title: 'DisplayResult' },
);
export type DisplayResult = Type.Static<typeof DisplayResult>;

export const ExecutionError = Type.Object(
  {
    name: Type.String({ description: 'The exception\'s class, e.g. `ZeroDivisionError`; `KeyboardInterrupt` for an interrupted run' }),
    value: Type.String({ description: 'Its message' }),
    traceback: Type.String({ description: 'The traceback as Python prints it, frames of the run\'s code only' }),
  },
  { title: 'ExecutionError' },
);
export type ExecutionError = Type.Static<typeof ExecutionError>;

export const ContextRunResult = Type.Object(
  {
    execution_count: Type.Integer({ description: 'The run\'s number in its context (from 1; a restart starts again)' }),
    stdout: Type.String(),
    stderr: Type.String(),
    results: Type.Array(DisplayResult, { description: 'In the order they were shown' }),
    error: Type.Union([ExecutionError, Type.Null()], { description: 'The exception the code ended with; null when it ran through' }),
    timed_out: Type.Boolean({ description: 'Its time limit interrupted it' }),
    interrupted: Type.Boolean({ description: 'It was interrupted (its time limit, POST …/interrupt, or the client going away)' }),
    restarted: Type.Boolean({ description: 'The interpreter did not stop when interrupted, or ended during the run, and was started again: the context\'s state is lost' }),
    files_changed: Type.Array(FileChange, { description: 'The image files the run wrote (under ~/.roomkit/outputs), with their public_url where files are linked' }),
    duration_ms: Type.Integer(),
  },
  { title: 'ContextRunResult' },
);
export type ContextRunResult = Type.Static<typeof ContextRunResult>;

export const ContextInterrupted = Type.Object(
  {
    context_id: Type.String({ format: 'uuid' }),
    interrupted: Type.Boolean({ description: 'A run was running and was sent the interrupt; false when none was' }),
  },
  { title: 'ContextInterrupted' },
);
export type ContextInterrupted = Type.Static<typeof ContextInterrupted>;
