/**
 * The eight 16-bit groups of a textual IPv6 address (`::` expanded, a dotted IPv4 tail as its two groups, a
 * `%zone` dropped). The address is taken as valid (`net.isIP` said 6).
 *
 * @example
 * ipv6Groups('2001:db8::7') // [0x2001, 0xdb8, 0, 0, 0, 0, 0, 7]
 */
export function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase().replace(/%.*$/, '');
  const v4Tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4Tail) {
    const [a, b, c, d] = v4Tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4Tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const groups = tail === undefined ? headParts : [...headParts, ...Array<string>(8 - headParts.length - tailParts.length).fill('0'), ...tailParts];
  return groups.map((group) => Number.parseInt(group || '0', 16));
}
