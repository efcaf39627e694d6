/**
 * Only where a command line's proxy listens (the `health` command): --host/--port, else the
 * config's server.host/port, else the defaults. Apart from settings.ts, and reading only those
 * two keys of the file, because a health check runs every few seconds beside the proxy: compiling
 * the whole config schema would cost it a quarter of a second each time. `check` validates the
 * whole file.
 */
import { resolve } from 'node:path';
import { readYaml } from './config-file.js';
import { CONFIG_SCHEMA } from './schema.js';
import { schemaDefaults } from './schema-defaults.js';
import type { CliOverrides } from './settings.js';
import { lazyConfigSchema, validateOrThrow } from './validate.js';

interface ListenAddress {
  host: string;
  port: number;
}

const SERVER = CONFIG_SCHEMA.properties.server;

// The config schema cut down to server.host and server.port, with the same rules and defaults.
const ADDRESS_SCHEMA = {
  type: 'object',
  properties: {
    server: {
      type: 'object',
      properties: { host: SERVER.properties.host, port: SERVER.properties.port },
      default: {},
    },
  },
};

const validateAddress = lazyConfigSchema(ADDRESS_SCHEMA);

export function resolveListenAddress(
  cli: Pick<CliOverrides, 'config' | 'host' | 'port'>,
  cwd = process.cwd(),
): ListenAddress {
  const { host, port } = cli;
  // Both flags given: they win over any file, so it need not be read (the image's default command).
  if (host !== undefined && port !== undefined) return { host, port };
  const configured = cli.config ? addressInFile(resolve(cwd, cli.config)) : defaultAddress();
  return { host: host ?? configured.host, port: port ?? configured.port };
}

function addressInFile(file: string): ListenAddress {
  const data = readYaml(file);
  validateOrThrow(validateAddress(), data, file);
  return (data as { server: ListenAddress }).server;
}

function defaultAddress(): ListenAddress {
  return (schemaDefaults(ADDRESS_SCHEMA) as { server: ListenAddress }).server;
}
