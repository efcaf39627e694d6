/**
 * Where `health` looks (src/config/listen-address.ts): the flags, else server.host and server.port
 * of the config file, else the defaults. It reads only those two keys, with the config schema's
 * own rules for them, so that a check run every few seconds does not compile the whole schema.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../../src/config/config-file.js';
import { resolveListenAddress } from '../../../src/config/listen-address.js';
import { userError } from '../../helpers/user-error.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-listen-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function config(name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}

describe('resolveListenAddress', () => {
  it('without a file: the config schema defaults, as serve would listen', () => {
    const { server } = defaultConfig();
    expect(resolveListenAddress({})).toEqual({ host: server.host, port: server.port });
    expect(resolveListenAddress({ port: 9000 })).toEqual({ host: server.host, port: 9000 });
  });

  it('takes server.host and server.port from the file (relative to cwd), the flags over them', () => {
    const file = config('both.yaml', 'server:\n  host: 10.1.2.3\n  port: 9999\n');
    expect(resolveListenAddress({ config: file }, dir)).toEqual({ host: '10.1.2.3', port: 9999 });
    expect(resolveListenAddress({ config: file, port: 7000 }, dir)).toEqual({ host: '10.1.2.3', port: 7000 });
    const portOnly = config('port.yaml', 'log_level: debug\nserver:\n  port: 9998\n');
    expect(resolveListenAddress({ config: portOnly }, dir)).toEqual({
      host: defaultConfig().server.host,
      port: 9998,
    });
  });

  it('reads only those two keys: a mistake elsewhere in the file is for check and serve to name', () => {
    const file = config('elsewhere.yaml', 'server:\n  port: 9997\n  bogus: 1\napis: 7\nlog_level: loud\n');
    expect(resolveListenAddress({ config: file }, dir)).toEqual({
      host: defaultConfig().server.host,
      port: 9997,
    });
  });

  it('a wrong host or port in the file: the same messages as the whole schema gives', () => {
    const file = config('wrong.yaml', 'server:\n  host: 5\n  port: abc\n');
    expect(userError(() => resolveListenAddress({ config: file }, dir)).message).toBe(
      [
        `${join(dir, file)}: server.host: must be a string (got 5)`,
        `${join(dir, file)}: server.port: must be an integer (got "abc")`,
      ].join('\n'),
    );
    const syntax = config('syntax.yaml', 'server: [\n');
    expect(userError(() => resolveListenAddress({ config: syntax }, dir)).message).toMatch(
      new RegExp(`^${join(dir, syntax).replace(/[.]/g, '\\.')}: Flow sequence`),
    );
  });

  it('a missing file is named, unless both flags make it unneeded', () => {
    expect(userError(() => resolveListenAddress({ config: 'nope.yaml', port: 1 }, dir)).message).toBe(
      `${join(dir, 'nope.yaml')}: config file not found or not readable`,
    );
    expect(resolveListenAddress({ config: 'nope.yaml', host: '::1', port: 1 }, dir)).toEqual({
      host: '::1',
      port: 1,
    });
  });
});
