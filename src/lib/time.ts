// Timestamps as stored and shown: ISO-8601 in UTC with milliseconds.
export function nowIso(): string {
  return new Date().toISOString();
}
