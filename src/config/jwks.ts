/**
 * `jwks:` of the proxy config → JwksSettings: how the proxy fetches keys from the JWKS URLs hosts
 * and agents register with (§4.1, §8.12). Checked at start-up: the allow-list entries parse and
 * the CA file is read once.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { UserError } from '../errors.js';
import { parseCidr } from './cidr.js';
import { parseTimerDuration } from './durations.js';
import type { FileConfig } from './schema.js';

export interface JwksSettings {
  /** Development only: http:// JWKS URLs are accepted (§8.12 says https only). */
  readonly allowHttp: boolean;
  /** Private ranges a JWKS URL may nevertheless reach (validated CIDRs). */
  readonly allowedCidrs: readonly string[];
  /** Extra trusted CA certificates (PEM) for a private PKI. */
  readonly ca?: string;
  readonly timeoutMs: number;
  readonly maxBytes: number;
  readonly refreshIntervalMs: number;
}

export function resolveJwks(config: FileConfig['jwks'], where: string, base: string): JwksSettings {
  config.allowed_cidrs.forEach((entry, i) => {
    try {
      parseCidr(entry);
    } catch (err) {
      throw new UserError(`${where}: jwks.allowed_cidrs[${i}]: ${(err as Error).message}`);
    }
  });
  let ca: string | undefined;
  if (config.ca_file !== undefined) {
    const file = resolve(base, config.ca_file);
    try {
      ca = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UserError(`${where}: jwks.ca_file: cannot read ${file}: ${(err as Error).message}`);
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) {
      throw new UserError(`${where}: jwks.ca_file: ${file} holds no PEM certificate`);
    }
  }
  const ms = (value: string | number, key: string): number =>
    parseTimerDuration(value, `${where}: jwks.${key}`, 1);
  return Object.freeze({
    allowHttp: config.allow_http,
    allowedCidrs: Object.freeze([...config.allowed_cidrs]),
    ...(ca !== undefined ? { ca } : {}),
    timeoutMs: ms(config.timeout, 'timeout'),
    maxBytes: config.max_bytes,
    refreshIntervalMs: ms(config.refresh_interval, 'refresh_interval'),
  });
}
