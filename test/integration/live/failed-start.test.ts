/**
 * Issue 12, the first hour: a start-up that fails (here: the port is taken) writes nothing — no
 * database file, not even its directory.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { startTestProxy } from '../../helpers/proxy.js';

let taken: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (taken ? taken.close(() => resolve()) : resolve()));
});

it('leaves no database behind when the port is taken', async () => {
  taken = createServer();
  const port = await new Promise<number>((resolve) => {
    const server = taken as Server;
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });
  const dir = join(mkdtempSync(join(tmpdir(), 'aap-failed-start-')), 'data');
  const db = join(dir, 'proxy.db');
  await expect(startTestProxy({ port, db })).rejects.toThrow(/cannot listen/);
  expect(existsSync(db)).toBe(false);
  expect(existsSync(dir)).toBe(false);
});
