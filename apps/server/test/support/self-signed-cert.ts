import { generateKeyPairSync, sign } from 'node:crypto';

/**
 * A self-signed certificate (ECDSA P-256, CA:TRUE) for localhost and 127.0.0.1, valid from an hour ago for a
 * day: `cert` serves and is the CA a client trusts (`ca` option, or NODE_EXTRA_CA_CERTS for a child process).
 * Built here with node:crypto (a few DER structures) so no test needs openssl or a certificate package.
 *
 * @example
 * const { key, cert } = selfSignedCert();
 * const server = http2.createSecureServer({ key, cert, allowHTTP1: true });
 */
export function selfSignedCert(): { key: string; cert: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from('svc test upstream')))));
  const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const now = Date.now();
  const extensions = tlv(
    0xa3,
    seq(
      // basicConstraints, critical: CA:TRUE, so the certificate is its own trust anchor.
      seq(oid('2.5.29.19'), tlv(0x01, Buffer.from([0xff])), tlv(0x04, seq(tlv(0x01, Buffer.from([0xff]))))),
      // subjectAltName: DNS localhost, IP 127.0.0.1.
      seq(oid('2.5.29.17'), tlv(0x04, seq(tlv(0x82, Buffer.from('localhost')), tlv(0x87, Buffer.from([127, 0, 0, 1]))))),
    ),
  );
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // v3
    tlv(0x02, Buffer.from([0x01, now & 0xff, (now >> 8) & 0xff])), // serial: differs between runs, positive
    ecdsaWithSha256,
    name,
    seq(utcTime(new Date(now - 3_600_000)), utcTime(new Date(now + 86_400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const der = seq(tbs, ecdsaWithSha256, tlv(0x03, Buffer.from([0]), sign('sha256', tbs, privateKey)));
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
  return { key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, cert };
}

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let rest = n; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

function seq(...content: Buffer[]): Buffer {
  return tlv(0x30, ...content);
}

function oid(text: string): Buffer {
  const [first = 0, second = 0, ...rest] = text.split('.').map(Number);
  const bytes = [40 * first + second];
  for (const value of rest) {
    const groups: number[] = [];
    for (let v = value; ; v = Math.floor(v / 128)) {
      groups.unshift(v & 0x7f);
      if (v < 128) break;
    }
    bytes.push(...groups.map((g, i) => (i < groups.length - 1 ? g | 0x80 : g)));
  }
  return tlv(0x06, Buffer.from(bytes));
}

function utcTime(date: Date): Buffer {
  return tlv(0x17, Buffer.from(`${date.toISOString().replace(/[-:T]/g, '').slice(2, 14)}Z`));
}
