// A template's Dockerfile read into the steps a build runs (core/template-builder.ts).
// dockerfile-ast does the reading (continuations, quoting, JSON forms, flags); this file
// decides what roomkit supports of it: one stage from `debian:<suite>` or another
// template, RUN, COPY and ADD from the request's files, ENV, ARG, WORKDIR, USER, LABEL,
// EXPOSE, CMD, ENTRYPOINT and HEALTHCHECK (the start command's ready check). Anything else is refused with its line number, so an
// author learns at once what this server will not build rather than getting an image
// that differs from the one Docker would make.
import { type Instruction, DockerfileParser } from 'dockerfile-ast';

/** A `FROM` of Debian's packages (as profiles' `debian:` images) or of a template of the organization. */
export type BaseImage = { kind: 'debian'; image: string } | { kind: 'template'; name: string };

/** A command as RUN, CMD and ENTRYPOINT give it: shell form (run by `sh -c`) or exec form. */
export type CommandForm = { shell: string } | { argv: string[] };

interface StepBase {
  /** 1-based line of the instruction. */
  line: number;
  /** The instruction as written (continuations joined): it is what the step's cache key hashes. */
  text: string;
}

export type DockerfileStep = StepBase &
  (
    | { kind: 'run'; command: CommandForm }
    | { kind: 'copy'; instruction: 'COPY' | 'ADD'; sources: string[]; dest: string; chown?: string }
    | { kind: 'env'; vars: [string, string][] }
    | { kind: 'arg'; name: string; value?: string }
    | { kind: 'workdir'; path: string }
    | { kind: 'user'; user: string }
    | { kind: 'label'; labels: [string, string][] }
    | { kind: 'expose'; ports: string[] }
    | { kind: 'cmd' | 'entrypoint'; command: CommandForm }
    /** HEALTHCHECK CMD: what must succeed in a new instance before it is ready (null: HEALTHCHECK NONE). */
    | { kind: 'healthcheck'; command: CommandForm | null }
  );

export interface ParsedDockerfile {
  from: BaseImage;
  /** The line of the FROM. */
  fromLine: number;
  fromText: string;
  steps: DockerfileStep[];
}

/** The Dockerfile cannot be built here; `line` is the instruction's (1-based), 0 for the file as a whole. */
export class DockerfileError extends Error {
  readonly line: number;
  constructor(line: number, message: string) {
    super(line > 0 ? `line ${line}: ${message}` : message);
    this.line = line;
  }
}

export const SUPPORTED_INSTRUCTIONS = ['FROM', 'RUN', 'COPY', 'ADD', 'ENV', 'ARG', 'WORKDIR', 'USER', 'LABEL', 'EXPOSE', 'CMD', 'ENTRYPOINT', 'HEALTHCHECK'] as const;
const DEBIAN_BASES = ['debian:bookworm', 'debian:trixie'];
const TEMPLATE_PREFIX = 'template:';
/** A template's name: what `template:NAME` and the API's paths carry. */
export const TEMPLATE_NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';
const TEMPLATE_NAME_RE = new RegExp(TEMPLATE_NAME_PATTERN);
const VARIABLE_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function parseDockerfile(source: string): ParsedDockerfile {
  const dockerfile = DockerfileParser.parse(source);
  const instructions = dockerfile.getInstructions();
  if (instructions.length === 0) throw new DockerfileError(0, 'the Dockerfile has no instructions: it needs a FROM');
  const [first, ...rest] = instructions;
  if (!first || first.getKeyword().toUpperCase() !== 'FROM') {
    throw new DockerfileError(lineOf(first), `the first instruction must be FROM (${first?.getKeyword().toUpperCase()} found); ARG before FROM is not supported`);
  }
  const steps: DockerfileStep[] = [];
  for (const instruction of rest) steps.push(stepOf(instruction));
  return { from: baseOf(first), fromLine: lineOf(first), fromText: textOf(first), steps };
}

/** Whether a profile's image names a template, and which. */
export function templateNameOf(image: string): string | undefined {
  return image.startsWith(TEMPLATE_PREFIX) ? image.slice(TEMPLATE_PREFIX.length) : undefined;
}

export function isTemplateName(name: string): boolean {
  return TEMPLATE_NAME_RE.test(name);
}

/**
 * `$NAME` and `${NAME}` replaced by their values (unknown ones by nothing), as Docker
 * expands ENV, WORKDIR, USER and COPY's destination; `\$` stays a dollar sign. RUN is
 * not expanded here: its shell expands the variables it is given.
 */
export function expandVariables(text: string, vars: ReadonlyMap<string, string>): string {
  return text.replace(/\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (match, braced?: string, bare?: string) => {
    if (match === '\\$') return '$';
    return vars.get((braced ?? bare) as string) ?? '';
  });
}

function baseOf(from: Instruction): BaseImage {
  const line = lineOf(from);
  refuseFlags(from, []);
  const args = from.getArguments().map((a) => a.getValue());
  if (args.length === 3 && args[1]?.toUpperCase() === 'AS') args.length = 1;
  const [image] = args;
  if (args.length !== 1 || image === undefined) throw new DockerfileError(line, 'FROM takes one image (and an optional `AS name`)');
  const template = templateNameOf(image);
  if (template !== undefined) {
    if (!isTemplateName(template)) throw new DockerfileError(line, `"${template}" is not a template name`);
    return { kind: 'template', name: template };
  }
  if (DEBIAN_BASES.includes(image)) return { kind: 'debian', image };
  throw new DockerfileError(
    line,
    `FROM ${image} is not supported: a template starts from ${DEBIAN_BASES.join(' or ')} (Debian's packages), or from another template of the organization (template:NAME)`,
  );
}

function stepOf(instruction: Instruction): DockerfileStep {
  const keyword = instruction.getKeyword().toUpperCase();
  const base: StepBase = { line: lineOf(instruction), text: textOf(instruction) };
  const args = () => instruction.getArguments().map((a) => a.getValue());
  switch (keyword) {
    case 'FROM':
      throw new DockerfileError(base.line, 'a second FROM (a multi-stage build) is not supported: one stage per template');
    case 'RUN':
      refuseFlags(instruction, []);
      return { ...base, kind: 'run', command: commandOf(instruction, base.line) };
    case 'CMD':
    case 'ENTRYPOINT':
      return { ...base, kind: keyword === 'CMD' ? 'cmd' : 'entrypoint', command: commandOf(instruction, base.line) };
    case 'COPY':
    case 'ADD': {
      refuseFlags(instruction, ['chown']);
      const chown = flagValue(instruction, 'chown');
      const paths = jsonArray(instruction.getArgumentsContent() ?? '') ?? args();
      if (paths.length < 2) throw new DockerfileError(base.line, `${keyword} takes one or more sources and a destination`);
      const dest = paths[paths.length - 1] as string;
      const sources = paths.slice(0, -1);
      for (const source of sources) {
        if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) throw new DockerfileError(base.line, `${keyword} of a URL (${source}) is not supported: only the template's files`);
      }
      return { ...base, kind: 'copy', instruction: keyword, sources, dest, ...(chown === undefined ? {} : { chown }) };
    }
    case 'ENV': {
      const vars = propertiesOf(instruction, base.line, 'ENV');
      if (vars.length === 0) throw new DockerfileError(base.line, 'ENV needs NAME=value');
      return { ...base, kind: 'env', vars };
    }
    case 'ARG': {
      const [arg, ...more] = args();
      if (arg === undefined || more.length > 0) throw new DockerfileError(base.line, 'ARG takes one NAME or NAME=default');
      const eq = arg.indexOf('=');
      const name = eq < 0 ? arg : arg.slice(0, eq);
      if (!VARIABLE_NAME_RE.test(name)) throw new DockerfileError(base.line, `"${name}" is not a variable name`);
      return eq < 0 ? { ...base, kind: 'arg', name } : { ...base, kind: 'arg', name, value: unquote(arg.slice(eq + 1)) };
    }
    case 'WORKDIR': {
      const path = instruction.getArgumentsContent()?.trim();
      if (!path) throw new DockerfileError(base.line, 'WORKDIR needs a directory');
      return { ...base, kind: 'workdir', path };
    }
    case 'USER': {
      const [user, ...more] = args();
      if (user === undefined || more.length > 0) throw new DockerfileError(base.line, 'USER takes one user (a name, or name:group)');
      return { ...base, kind: 'user', user };
    }
    case 'LABEL':
      return { ...base, kind: 'label', labels: propertiesOf(instruction, base.line, 'LABEL') };
    case 'HEALTHCHECK': {
      // Its timing flags are Docker's for a container's whole life; here the check only
      // says when a new instance's start command is ready, on roomkit's own schedule.
      refuseFlags(instruction, ['interval', 'timeout', 'start-period', 'start-interval', 'retries']);
      const content = instruction.getArgumentsContent()?.trim() ?? '';
      if (/^NONE$/i.test(content)) return { ...base, kind: 'healthcheck', command: null };
      const match = /^CMD\s+([\s\S]+)$/i.exec(content);
      if (!match?.[1]) throw new DockerfileError(base.line, 'HEALTHCHECK takes CMD and a command, or NONE');
      const argv = jsonArray(match[1]);
      return { ...base, kind: 'healthcheck', command: argv && argv.length > 0 ? { argv } : { shell: match[1].trim() } };
    }
    case 'EXPOSE': {
      const ports = args();
      for (const port of ports) {
        if (!/^[0-9]{1,5}(\/(tcp|udp))?$/.test(port)) throw new DockerfileError(base.line, `EXPOSE ${port}: a port is a number, with /tcp or /udp`);
      }
      return { ...base, kind: 'expose', ports };
    }
    default:
      throw new DockerfileError(base.line, `${keyword} is not supported here; supported: ${SUPPORTED_INSTRUCTIONS.join(', ')}`);
  }
}

/** The exec form when the arguments are a JSON array of strings, else the shell form (as Docker reads them). */
function commandOf(instruction: Instruction, line: number): CommandForm {
  const content = instruction.getArgumentsContent()?.trim() ?? '';
  if (content === '') throw new DockerfileError(line, `${instruction.getKeyword().toUpperCase()} needs a command`);
  const argv = jsonArray(content);
  if (argv) {
    if (argv.length === 0) throw new DockerfileError(line, `${instruction.getKeyword().toUpperCase()} [] has no program`);
    return { argv };
  }
  return { shell: content };
}

function jsonArray(content: string): string[] | undefined {
  if (!content.trimStart().startsWith('[')) return undefined;
  try {
    const value: unknown = JSON.parse(content);
    if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  } catch {
    // Not JSON: Docker runs it in the shell form.
  }
  return undefined;
}

function propertiesOf(instruction: Instruction, line: number, keyword: string): [string, string][] {
  const properties = (instruction as Instruction & { getProperties(): { getName(): string; getValue(): string | null }[] }).getProperties();
  return properties.map((p) => {
    const name = p.getName();
    if (keyword === 'ENV' && !VARIABLE_NAME_RE.test(name)) throw new DockerfileError(line, `"${name}" is not a variable name`);
    return [name, p.getValue() ?? ''];
  });
}

function flagsOf(instruction: Instruction): { getName(): string; getValue(): string | null }[] {
  const withFlags = instruction as Instruction & { getFlags?(): { getName(): string; getValue(): string | null }[] };
  return withFlags.getFlags?.() ?? [];
}

function refuseFlags(instruction: Instruction, allowed: string[]): void {
  for (const flag of flagsOf(instruction)) {
    if (!allowed.includes(flag.getName())) {
      throw new DockerfileError(lineOf(instruction), `${instruction.getKeyword().toUpperCase()} --${flag.getName()} is not supported`);
    }
  }
}

function flagValue(instruction: Instruction, name: string): string | undefined {
  const flag = flagsOf(instruction).find((f) => f.getName() === name);
  if (flag === undefined) return undefined;
  const value = flag.getValue();
  if (!value) throw new DockerfileError(lineOf(instruction), `--${name} needs a value`);
  return value;
}

function unquote(value: string): string {
  return value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0] ? value.slice(1, -1) : value;
}

function lineOf(instruction: Instruction | undefined): number {
  return instruction ? instruction.getRange().start.line + 1 : 0;
}

function textOf(instruction: Instruction): string {
  const flags = flagsOf(instruction).map((f) => `--${f.getName()}=${f.getValue() ?? ''} `).join('');
  return `${instruction.getKeyword().toUpperCase()} ${flags}${instruction.getArgumentsContent() ?? ''}`.trim();
}
