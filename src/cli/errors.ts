// Errors meant for the person at the terminal.

/** Printed as it is (no stack), then the process exits with exitCode. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}
