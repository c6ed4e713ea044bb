// The error of a setting that is not valid: what `roomkit serve` prints before it exits.
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
