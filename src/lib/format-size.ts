// Byte counts as people read them, in the binary units the limits are set in. Prose
// (tool descriptions, progress messages) drops a needless decimal: "5 MiB", "1.5 GiB",
// "300 bytes". Listings (the CLI's) keep one decimal so that columns line up: "5.0 MiB",
// "300 B".

const UNITS: [number, string][] = [
  [1024 ** 4, 'TiB'],
  [1024 ** 3, 'GiB'],
  [1024 ** 2, 'MiB'],
  [1024, 'KiB'],
];

export function formatBytes(bytes: number, style: 'prose' | 'listing' = 'prose'): string {
  for (const [unit, name] of UNITS) {
    if (bytes >= unit) {
      const n = bytes / unit;
      return `${style === 'prose' && Number.isInteger(n) ? n : n.toFixed(1)} ${name}`;
    }
  }
  return style === 'prose' ? `${bytes} bytes` : `${bytes} B`;
}
