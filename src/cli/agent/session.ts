/**
 * What every agent command after `init` works with: the key file, the proxy it registered with
 * (discovered afresh each run, §5.1), a clock and a sleep (injected, so tests drive polling on
 * the proxy's test clock), and where to print.
 */
import { UserError } from '../../errors.js';
import { parseBaseUrl } from '../admin-api.js';
import type { CliOutput } from '../output.js';
import { plainHttpWarning } from '../plain-http.js';
import { discover, type Credential, type Discovery } from './client.js';
import { loadKeyFile, saveKeyFile, type AgentFile } from './key-file.js';
import { agentJwt, dpopProof, hostJwt } from './signer.js';

/** Time as the CLI sees it. */
export interface AgentRuntime {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const realRuntime: AgentRuntime = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

export interface Session {
  readonly path: string;
  file: AgentFile;
  readonly url: string;
  readonly discovery: Discovery;
  readonly runtime: AgentRuntime;
  readonly io: CliOutput;
  readonly json: boolean;
  /**
   * A fresh host JWT (§4.2) for `method url`; with the agent key for registration. With `--dpop`,
   * bound to the host key and sent with a proof for that request (§4.4).
   */
  hostCredential(method: string, url: string, withAgentKey?: boolean): Credential;
  /**
   * A fresh agent JWT (§4.3) for `method url`, addressed to `aud` (default: the issuer); with
   * `--dpop`, bound to the agent key and sent with a proof for that request (§4.4).
   */
  agentCredential(method: string, url: string, aud?: string): Credential;
  /** The registered agent's id, or a usage error saying to register first. */
  agentId(): string;
  /** Merges `changes` into the key file (still 0600). */
  save(changes: Partial<AgentFile>): void;
}

export interface SessionOptions {
  readonly path: string;
  /** --url; else the key file's, else $AGENT_AUTH_PROXY_URL. */
  readonly url: string | undefined;
  readonly env: NodeJS.ProcessEnv;
  readonly runtime: AgentRuntime;
  readonly io: CliOutput;
  readonly json: boolean;
  /** --dpop: every JWT bound to its signing key, with a DPoP proof per request (§4.4). */
  readonly dpop: boolean;
  /** --insecure-http: plain http to another host is allowed, with a warning (plain-http.ts). */
  readonly insecureHttp: boolean;
}

/** --url, else the key file's, else $AGENT_AUTH_PROXY_URL; with where it came from, for messages. */
function proxyUrl(o: SessionOptions, file: AgentFile): { url: string; from: string } {
  const [given, from] =
    o.url !== undefined
      ? [o.url, '--url']
      : file.url !== undefined
        ? [file.url, `the proxy URL in ${o.path}`]
        : [o.env.AGENT_AUTH_PROXY_URL, 'AGENT_AUTH_PROXY_URL'];
  if (given === undefined) {
    throw new UserError(`no proxy URL: pass --url URL (it is then stored in ${o.path})`);
  }
  return { url: parseBaseUrl(given, from), from };
}

export async function openSession(o: SessionOptions): Promise<Session> {
  const file = loadKeyFile(o.path);
  const { url, from } = proxyUrl(o, file);
  // Every request after discovery carries a JWT, and discovery keeps them on this origin.
  const warning = plainHttpWarning(
    url,
    from,
    'signed agent tokens (bearer credentials until they expire)',
    o.insecureHttp,
  );
  if (warning !== undefined) o.io.err(warning);
  const discovery = await discover(url);
  const session: Session = {
    path: o.path,
    file,
    url,
    discovery,
    runtime: o.runtime,
    io: o.io,
    json: o.json,
    hostCredential: (method, url, withAgentKey = false) => {
      const { agent_key: agent, host_key: host } = session.file;
      const now = o.runtime.now();
      const jwt = hostJwt(host, discovery.issuer, now, withAgentKey ? agent : undefined, o.dpop);
      return o.dpop ? { jwt, proof: dpopProof(host, method, url, jwt, now) } : jwt;
    },
    agentCredential: (method, url, aud = discovery.issuer) => {
      const { agent_key: agent, host_key: host } = session.file;
      const now = o.runtime.now();
      const jwt = agentJwt(agent, host, session.agentId(), aud, now, o.dpop);
      return o.dpop ? { jwt, proof: dpopProof(agent, method, url, jwt, now) } : jwt;
    },
    agentId: () => {
      if (session.file.agent_id === undefined) {
        throw new UserError(`${o.path} has no agent yet: run agent-auth-proxy agent register first`);
      }
      return session.file.agent_id;
    },
    save: (changes) => {
      session.file = { ...session.file, ...changes };
      saveKeyFile(o.path, session.file);
    },
  };
  return session;
}
