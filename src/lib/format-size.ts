// Byte counts as people read them, in the binary units the limits are set in: "5 MiB",
// "1.5 GiB", "300 bytes". Tool descriptions, progress messages and CLI listings share it.

const UNITS: [number, string][] = [
  [1024 ** 4, 'TiB'],
  [1024 ** 3, 'GiB'],
  [1024 ** 2, 'MiB'],
  [1024, 'KiB'],
];

export function formatBytes(bytes: number): string {
  for (const [unit, name] of UNITS) {
    if (bytes >= unit) {
      const n = bytes / unit;
      return `${Number.isInteger(n) ? n : n.toFixed(1)} ${name}`;
    }
  }
  return `${bytes} bytes`;
}
