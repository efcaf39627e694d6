/**
 * A page form over MAX_FORM_BYTES (8 KiB, README "Bounds") is answered 413, whether its body
 * arrives in one packet or two, and the client gets that answer; one in more than 64 pieces, 400.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestProtocol } from '../../helpers/protocol.js';
import { originOf, startPagesProxy } from '../../helpers/page-http.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy();
});
afterAll(async () => {
  await p?.close();
});

function send(url: string, bytes: Buffer, waitMs = 3000): Promise<{ text: string; error?: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const s = connect({ host: hostname, port: Number(port) }, () => s.write(bytes));
    const done = (): void => {
      clearTimeout(t);
      s.destroy();
      resolve({ text: Buffer.concat(chunks).toString('latin1'), ...(error ? { error } : {}) });
    };
    const t = setTimeout(done, waitMs);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
    });
    s.on('close', done);
  });
}

describe('page form bodies over 8 KiB', () => {
  it('POST /sign-in with a 9 KiB form is answered 413, not a dropped connection', async () => {
    const body = `user=${'a'.repeat(9 * 1024)}&password=x`;
    const head =
      `POST /sign-in HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${originOf(p)}\r\n` +
      `content-type: application/x-www-form-urlencoded\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const r = await send(p.proxy.url, Buffer.from(head + body));
    console.log(JSON.stringify(r).slice(0, 400));
    expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('POST /sign-in whose 9 KiB form arrives in two parts is answered 413, not a dropped connection', async () => {
    const body = `user=${'a'.repeat(9 * 1024)}&password=x`;
    const head =
      `POST /sign-in HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${originOf(p)}\r\n` +
      `content-type: application/x-www-form-urlencoded\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const { hostname, port } = new URL(p.proxy.url);
    const out = await new Promise<{ text: string; error?: string }>((resolve) => {
      const chunks: Buffer[] = [];
      let error: string | undefined;
      const s = connect({ host: hostname, port: Number(port) }, () => {
        s.write(head + body.slice(0, 4096));
        setTimeout(() => s.write(body.slice(4096)), 200);
      });
      const t = setTimeout(() => s.destroy(), 3000);
      s.on('data', (c: Buffer) => chunks.push(c));
      s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
      s.on('close', () => {
        clearTimeout(t);
        resolve({ text: Buffer.concat(chunks).toString('latin1'), ...(error ? { error } : {}) });
      });
    });
    console.log(JSON.stringify(out).slice(0, 200));
    expect(out.text).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('the same over fetch: the client sees a 413 page', async () => {
    const body = `user=${'a'.repeat(9 * 1024)}&password=x`;
    const res = await fetch(`${p.proxy.url}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: originOf(p), 'content-type': 'application/x-www-form-urlencoded' },
      body,
    }).then(
      (r) => r.status,
      (e: unknown) => `fetch failed: ${e instanceof Error ? e.message : 'unknown'}`,
    );
    expect(res).toBe(413);
  });

  // A form is 8 KiB at most, so 64 pieces (README "Bounds"): one sent thinner is not read on.
  it('a form sent in 1-byte chunks is refused 400 after 64 of them, and the connection closes', async () => {
    const body = `user=${'a'.repeat(200)}&password=x`;
    const head =
      `POST /sign-in HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${originOf(p)}\r\n` +
      `content-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\n\r\n`;
    const chunks = body.replace(/./g, (c) => `1\r\n${c}\r\n`);
    const r = await send(p.proxy.url, Buffer.from(`${head}${chunks}0\r\n\r\n`));
    expect(r.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.text).toContain('more than 64 pieces');
    expect(r.text).toMatch(/\r\nconnection: close\r\n/i);
  });

  it('the same form in one chunk is read, and refused only for its unknown user', async () => {
    const body = `user=${'a'.repeat(200)}&password=x`;
    const head =
      `POST /sign-in HTTP/1.1\r\nhost: 127.0.0.1\r\norigin: ${originOf(p)}\r\n` +
      `content-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`;
    const r = await send(
      p.proxy.url,
      Buffer.from(`${head}${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`),
    );
    expect(r.text).toContain('That user name, password or one-time code is not right.');
  });
});
