import { connect } from 'node:net';

/** Sends `bytes` on a fresh socket; everything received until close or `waitMs`. */
export function rawExchange(url: string, bytes: string | Buffer, waitMs = 1500): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const s = connect({ host: hostname, port: Number(port) }, () => s.write(bytes));
    const done = (): void => {
      clearTimeout(t);
      s.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const t = setTimeout(done, waitMs);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('close', done);
    s.on('error', () => undefined);
  });
}

/** Status lines in order. */
export function statuses(text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
}
