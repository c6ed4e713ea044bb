// IPv4 ranges in CIDR form, as the configuration names the address pool and the host's
// networks: parsed to a number once, checked for host bits, and printed back.

export function parseCidr(cidr: string): { base: number; prefixLength: number } {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  if (!match) throw new Error(`"${cidr}" is not an IPv4 range like 10.213.0.0/16`);
  const octets = match.slice(1, 5).map(Number);
  const prefixLength = Number(match[5]);
  if (octets.some((o) => o > 255) || prefixLength > 32) throw new Error(`"${cidr}" is not an IPv4 range`);
  const address = octets.reduce((acc, o) => acc * 256 + o, 0);
  const blockSize = 2 ** (32 - prefixLength);
  if (address % blockSize !== 0) throw new Error(`"${cidr}" has host bits set; the range starts at ${formatIp(address - (address % blockSize))}`);
  return { base: address, prefixLength };
}

export function formatIp(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');
}
