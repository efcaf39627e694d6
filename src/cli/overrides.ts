/** Parsed serve/capabilities/check flags → the overrides the settings resolver takes. */
import { MAX_WORKERS } from '../config/schema.js';
import type { CliOverrides } from '../config/settings.js';
import { UserError } from '../errors.js';
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from '../log-levels.js';

export function toOverrides(values: {
  spec?: string[];
  upstream?: string[];
  config?: string;
  host?: string;
  port?: string;
  workers?: string;
  'internal-port'?: string;
  issuer?: string;
  db?: string;
  policy?: string;
  'admin-token'?: string;
  'admin-token-file'?: string;
  'introspection-token'?: string;
  'introspection-token-file'?: string;
  'upstream-header'?: string[];
  'upstream-timeout'?: string;
  'mock-upstream'?: boolean;
  'allow-remote-refs'?: boolean;
  'allow-local-refs-anywhere'?: boolean;
  'allow-http-specs'?: boolean;
  'log-level'?: string;
  'log-format'?: string;
}): CliOverrides {
  const port = portFlag('--port', values.port);
  const internalPort = portFlag('--internal-port', values['internal-port']);
  const workers = workersFlag(values.workers);
  const level = values['log-level'];
  if (level !== undefined && !LOG_LEVELS.includes(level as LogLevel)) {
    throw new UserError(`--log-level ${JSON.stringify(level)}: must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const format = values['log-format'];
  if (format !== undefined && !LOG_FORMATS.includes(format as LogFormat)) {
    throw new UserError(`--log-format ${JSON.stringify(format)}: must be one of ${LOG_FORMATS.join(', ')}`);
  }
  return {
    ...(values.config !== undefined ? { config: values.config } : {}),
    ...(values.spec ? { specs: values.spec } : {}),
    ...(values.upstream ? { upstreams: values.upstream } : {}),
    ...(values.host !== undefined ? { host: values.host } : {}),
    ...(port !== undefined ? { port } : {}),
    ...(internalPort !== undefined ? { internalPort } : {}),
    ...(workers !== undefined ? { workers } : {}),
    ...(values.issuer !== undefined ? { issuer: values.issuer } : {}),
    ...(values.db !== undefined ? { db: values.db } : {}),
    ...(values.policy !== undefined ? { policy: values.policy } : {}),
    ...(values['admin-token'] !== undefined ? { adminToken: values['admin-token'] } : {}),
    ...(values['admin-token-file'] !== undefined ? { adminTokenFile: values['admin-token-file'] } : {}),
    ...(values['introspection-token'] !== undefined
      ? { introspectionToken: values['introspection-token'] }
      : {}),
    ...(values['introspection-token-file'] !== undefined
      ? { introspectionTokenFile: values['introspection-token-file'] }
      : {}),
    ...(values['upstream-header'] ? { upstreamHeaders: values['upstream-header'] } : {}),
    ...(values['upstream-timeout'] !== undefined ? { upstreamTimeout: values['upstream-timeout'] } : {}),
    ...(values['mock-upstream'] ? { mockUpstream: true } : {}),
    ...(values['allow-remote-refs'] ? { allowRemoteRefs: true } : {}),
    ...(values['allow-local-refs-anywhere'] ? { allowLocalRefsAnywhere: true } : {}),
    ...(values['allow-http-specs'] ? { allowHttpSpecs: true } : {}),
    ...(level !== undefined ? { logLevel: level as LogLevel } : {}),
    ...(format !== undefined ? { logFormat: format as LogFormat } : {}),
  };
}

function portFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
    throw new UserError(`${flag} ${JSON.stringify(value)}: must be a number from 0 to 65535`);
  }
  return Number(value);
}

function workersFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > MAX_WORKERS) {
    throw new UserError(
      `--workers ${JSON.stringify(value)}: must be a whole number from 1 to ${MAX_WORKERS}`,
    );
  }
  return Number(value);
}
