/**
 * The agent CLI's key file: a host key pair, an agent key pair (Ed25519 JWKs, §4.1) and what the
 * CLI learned about the proxy (its URL, the agent and host ids). It holds private keys, so it is
 * created with mode 0600 (in a 0700 directory) and refused when group or others can read it
 * (§10.7: the security of the system depends on the client protecting its keys).
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UserError } from '../../errors.js';
import { newKeyPair } from '../../util/key-pair.js';

export const ENV_FILE = 'AGENT_AUTH_FILE';
export const DEFAULT_FILE = './.agent-auth/agent.json';

export interface PrivateJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
  readonly d: string;
}

export interface AgentFile {
  readonly version: 1;
  readonly host_key: PrivateJwk;
  readonly agent_key: PrivateJwk;
  /** The proxy's base URL, stored by `register` so later commands need no --url. */
  readonly url?: string;
  readonly agent_id?: string;
  readonly host_id?: string;
}

/** `--file`, else $AGENT_AUTH_FILE, else ./.agent-auth/agent.json; always absolute. */
export function keyFilePath(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return resolve(flag ?? env[ENV_FILE] ?? DEFAULT_FILE);
}

function newKey(): PrivateJwk {
  const jwk = newKeyPair('ed25519').privateKey.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string' || typeof jwk.d !== 'string') throw new Error('Ed25519 JWK without x or d');
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d };
}

/** `agent init`: fresh host and agent keys; an existing file is replaced only with `force`. */
export function createKeyFile(path: string, force: boolean, url?: string): AgentFile {
  if (existsSync(path) && !force) {
    throw new UserError(
      `${path} already exists: it may hold a registered agent's keys. Use --force to replace it, or --file for another file.`,
    );
  }
  const file: AgentFile = {
    version: 1,
    host_key: newKey(),
    agent_key: newKey(),
    ...(url !== undefined ? { url } : {}),
  };
  saveKeyFile(path, file);
  return file;
}

/** Reads the file after checking that only its owner can read it. */
export function loadKeyFile(path: string): AgentFile {
  if (!existsSync(path)) {
    throw new UserError(`${path} does not exist: run agent-auth-proxy agent init first (or pass --file).`);
  }
  checkMode(path);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new UserError(`${path} is not JSON: is it an agent key file (agent init writes one)?`);
  }
  if (!isAgentFile(value)) {
    throw new UserError(`${path} is not an agent key file (version 1 with host_key and agent_key).`);
  }
  return value;
}

/**
 * Writes the whole file through a 0600 temporary file and a rename, so a crash never leaves half
 * a key file and the keys are never readable by others, not even for a moment.
 */
export function saveKeyFile(path: string, file: AgentFile): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  // 'wx' never follows a link planted at the temporary name (a shared directory such as /tmp);
  // a leftover of a crashed run is removed (unlinking removes a link, not its target) and retried.
  const text = `${JSON.stringify(file, null, 2)}\n`;
  try {
    writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    unlinkSync(temporary);
    writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' });
  }
  // The mode given to writeFileSync is masked by the umask and ignored for an existing file.
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
}

function checkMode(path: string): void {
  // Windows has no POSIX modes; its ACLs are the user's to manage.
  if (process.platform === 'win32') return;
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new UserError(
      `${path} holds private keys but its mode is ${mode.toString(8).padStart(4, '0')}, open to group or others: run chmod 600 ${path} (and consider the keys exposed).`,
    );
  }
}

function isJwk(value: unknown): value is PrivateJwk {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return v.kty === 'OKP' && v.crv === 'Ed25519' && typeof v.x === 'string' && typeof v.d === 'string';
}

function isAgentFile(value: unknown): value is AgentFile {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const optional = (k: string): boolean => v[k] === undefined || typeof v[k] === 'string';
  return (
    v.version === 1 &&
    isJwk(v.host_key) &&
    isJwk(v.agent_key) &&
    optional('url') &&
    optional('agent_id') &&
    optional('host_id')
  );
}
