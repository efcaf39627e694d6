/**
 * The admin CLI's commands (src/cli/admin.ts runs them): for each, the flags it takes, the request
 * to the operator API (/admin/*) it builds from argv, checked before anything is sent, and the
 * formatter of the reply (admin-format.ts).
 */
import { readFileSync } from 'node:fs';
import { formatDuration, parseDuration } from '../config/durations.js';
import { UserError } from '../errors.js';
import { MAX_PAGE } from '../http/listing-page.js';
import { MAX_ENROLMENT_CODE_TTL_MS } from '../protocol/enrolment-codes.js';
import type { AgentStatus, HostStatus, PerCallStatus } from '../storage/types.js';
import * as format from './admin-format.js';
import { parseFlags } from './parse-flags.js';

export const HELP = 'Run agent-auth-proxy admin --help for usage.';

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  'insecure-http': { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'agent-id': { type: 'string' },
  code: { type: 'string' },
  'host-id': { type: 'string' },
  'user-id': { type: 'string' },
  status: { type: 'string' },
  capability: { type: 'string', multiple: true },
  constraints: { type: 'string' },
  reason: { type: 'string' },
  name: { type: 'string' },
  'public-key': { type: 'string' },
  'default-capability': { type: 'string', multiple: true },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  'passkey-id': { type: 'string' },
  ttl: { type: 'string' },
  all: { type: 'boolean' },
} as const;

export const COMMON = ['url', 'token', 'token-file', 'insecure-http', 'json', 'help'] as const;
export type Values = ReturnType<typeof parseAdminArgs>['values'];
type Flag = Exclude<keyof typeof OPTIONS, (typeof COMMON)[number]>;

export interface Call {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: Record<string, unknown>;
}

export interface Command {
  /** What the one positional argument names, if the command takes one. */
  readonly id?: 'approval' | 'call' | 'host' | 'agent';
  readonly flags: readonly Flag[];
  request(v: Values, id: string): Call;
  text(body: unknown, status: number): string;
}

const HOST_STATUSES = ['active', 'pending', 'revoked', 'rejected'] as const satisfies readonly HostStatus[];
const AGENT_STATUSES = [
  'pending',
  'active',
  'expired',
  'revoked',
  'rejected',
  'claimed',
] as const satisfies readonly AgentStatus[];

const CALL_STATUSES = [
  'pending',
  'executing',
  'completed',
  'failed',
] as const satisfies readonly PerCallStatus[];

// The bounds the server checks, repeated here so a value out of them is a usage mistake (exit 2)
// before any request, not a refusal after one (exit 1). The keyset listings share MAX_PAGE
// (src/http/listing-page.ts), the longest code life is MAX_ENROLMENT_CODE_TTL_MS; the rest are
// literals in their routes: routes/admin-per-call.ts and routes/admin-activity.ts for the pages,
// routes/admin-users.ts for the shortest code life. test/integration/admin-cli.test.ts holds each
// to its server.
const MAX_PER_CALL_PAGE = 200;
const MAX_ACTIVITY_PAGE = 1000;
const MIN_ENROLMENT_TTL_MS = 60_000;

export const COMMANDS: Readonly<Record<string, Command>> = {
  // Per-call approvals (issue 16 §1): listed and denied here; approving takes the user's passkey.
  'calls list': {
    flags: ['status', 'limit', 'cursor'],
    request: (v) =>
      get('/admin/per-call-approvals', {
        status: oneOf('--status', v.status, CALL_STATUSES),
        limit: limit(v.limit, MAX_PER_CALL_PAGE),
        cursor: v.cursor,
      }),
    text: format.perCallsText,
  },
  'calls deny': {
    id: 'call',
    flags: ['reason'],
    request: (v, id) => post(`/admin/per-call-approvals/${enc(id)}/deny`, { reason: v.reason }),
    text: (body) => `denied call ${format.cell(format.rec(body).id)}: the agent is told approval_denied`,
  },
  'approvals list': {
    flags: ['agent-id', 'code', 'limit', 'cursor'],
    request: (v) =>
      get('/admin/approvals', {
        agent_id: v['agent-id'],
        user_code: v.code,
        limit: limit(v.limit, MAX_PAGE),
        cursor: v.cursor,
      }),
    text: format.approvalsText,
  },
  'approvals approve': {
    id: 'approval',
    flags: ['user-id', 'capability', 'constraints', 'reason'],
    request: (v, id) =>
      post(`/admin/approvals/${enc(id)}/approve`, {
        user_id: v['user-id'],
        capabilities: v.capability,
        constraints: v.constraints === undefined ? undefined : jsonObject('--constraints', v.constraints),
        reason: v.reason,
      }),
    text: (body) => format.decisionText('approved', body),
  },
  'approvals deny': {
    id: 'approval',
    flags: ['reason'],
    request: (v, id) => post(`/admin/approvals/${enc(id)}/deny`, { reason: v.reason }),
    text: (body) => format.decisionText('denied', body),
  },
  'hosts list': {
    flags: ['status', 'user-id', 'limit', 'cursor'],
    request: (v) =>
      get('/admin/hosts', {
        status: oneOf('--status', v.status, HOST_STATUSES),
        user_id: v['user-id'],
        limit: limit(v.limit, MAX_PAGE),
        cursor: v.cursor,
      }),
    text: format.hostsText,
  },
  'hosts show': {
    id: 'host',
    flags: [],
    request: (_v, id) => get(`/admin/hosts/${enc(id)}`),
    text: format.hostText,
  },
  'hosts add': {
    flags: ['public-key', 'name', 'user-id', 'default-capability'],
    request: (v) => {
      if (v['public-key'] === undefined)
        throw new UserError(`admin hosts add: --public-key is required\n${HELP}`);
      return post('/admin/hosts', {
        name: v.name,
        public_key: jsonObject('--public-key', v['public-key']),
        user_id: v['user-id'],
        default_capabilities: v['default-capability'],
      });
    },
    text: (body, status) =>
      `${status === 201 ? 'created' : 'updated the existing'} host\n\n${format.hostText(body)}`,
  },
  'hosts link': {
    id: 'host',
    flags: ['user-id'],
    request: (v, id) => {
      if (v['user-id'] === undefined) throw new UserError(`admin hosts link: --user-id is required\n${HELP}`);
      return post(`/admin/hosts/${enc(id)}/link`, { user_id: v['user-id'] });
    },
    text: (body) => format.hostChangeText('linked', body),
  },
  'hosts unlink': {
    id: 'host',
    flags: [],
    request: (_v, id) => post(`/admin/hosts/${enc(id)}/unlink`, {}),
    text: (body) => format.hostChangeText('unlinked', body),
  },
  'hosts revoke': {
    id: 'host',
    flags: [],
    request: (_v, id) => post(`/admin/hosts/${enc(id)}/revoke`, {}),
    text: (body) => format.hostChangeText('revoked', body),
  },
  'agents list': {
    flags: ['host-id', 'status', 'user-id', 'limit', 'cursor'],
    request: (v) =>
      get('/admin/agents', {
        host_id: v['host-id'],
        status: oneOf('--status', v.status, AGENT_STATUSES),
        user_id: v['user-id'],
        limit: limit(v.limit, MAX_PAGE),
        cursor: v.cursor,
      }),
    text: format.agentsText,
  },
  'agents show': {
    id: 'agent',
    flags: [],
    request: (_v, id) => get(`/admin/agents/${enc(id)}`),
    text: format.agentText,
  },
  'agents revoke': {
    id: 'agent',
    flags: [],
    request: (_v, id) => post(`/admin/agents/${enc(id)}/revoke`, {}),
    text: (body) => `revoked agent ${format.cell(format.rec(body).agent_id)}`,
  },
  // A person who lost a passkey cannot change their set on the account page: the operator can.
  'passkeys list': {
    flags: ['user-id'],
    request: (v) => get(`/admin/users/${enc(requiredUser('passkeys list', v))}/passkeys`),
    text: format.passkeysText,
  },
  'passkeys remove': {
    flags: ['user-id', 'passkey-id', 'all', 'reason'],
    request: (v) => {
      const user = requiredUser('passkeys remove', v);
      if ((v['passkey-id'] === undefined) === (v.all !== true))
        throw new UserError(`admin passkeys remove: give --passkey-id ID or --all, not both\n${HELP}`);
      return post(`/admin/users/${enc(user)}/passkeys/remove`, {
        ...(v.all === true ? { all: true } : { passkey_id: v['passkey-id'] }),
        reason: v.reason,
      });
    },
    text: format.passkeysRemovedText,
  },
  'users sign-out': {
    flags: ['user-id', 'reason'],
    request: (v) =>
      post(`/admin/users/${enc(requiredUser('users sign-out', v))}/sign-out`, { reason: v.reason }),
    text: (body) => {
      const r = format.rec(body);
      const n = typeof r.sessions_ended === 'number' ? r.sessions_ended : 0;
      return `signed out user ${format.cell(r.user_id)}: ${n} session${n === 1 ? '' : 's'} ended`;
    },
  },
  'users remove': {
    flags: ['user-id', 'reason'],
    request: (v) => post(`/admin/users/${enc(requiredUser('users remove', v))}/remove`, { reason: v.reason }),
    text: (body) => {
      const r = format.rec(body);
      const count = (key: string, noun: string): string => {
        const n = typeof r[key] === 'number' ? r[key] : 0;
        return `${n} ${noun}${n === 1 ? '' : 's'}`;
      };
      return `removed user ${format.cell(r.user_id)}: ${count('hosts_revoked', 'host')} and ${count('agents_revoked', 'agent')} revoked, ${count('passkeys_removed', 'passkey')} and ${count('sessions_ended', 'session')} removed`;
    },
  },
  'passkeys code': {
    flags: ['user-id', 'ttl'],
    request: (v) =>
      post(`/admin/users/${enc(requiredUser('passkeys code', v))}/passkeys/enrolment-code`, {
        ttl_seconds: enrolmentTtlSeconds(v.ttl),
      }),
    text: format.enrolmentCodeText,
  },
  activity: {
    flags: ['agent-id', 'host-id', 'capability', 'since', 'until', 'limit', 'cursor'],
    request: (v) => {
      if ((v.capability?.length ?? 0) > 1)
        throw new UserError(`admin activity: --capability filters by one capability\n${HELP}`);
      return get('/admin/activity', {
        agent_id: v['agent-id'],
        host_id: v['host-id'],
        capability: v.capability?.[0],
        since: isoTime('--since', v.since),
        until: isoTime('--until', v.until),
        limit: limit(v.limit, MAX_ACTIVITY_PAGE),
        cursor: v.cursor,
      });
    },
    text: format.activityText,
  },
};

export function parseAdminArgs(argv: readonly string[]) {
  return parseFlags(argv, OPTIONS);
}

function get(path: string, query: Record<string, string | undefined> = {}): Call {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return { method: 'GET', path: s ? `${path}?${s}` : path };
}

function post(path: string, body: Record<string, unknown>): Call {
  return {
    method: 'POST',
    path,
    body: Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined)),
  };
}

const enc = encodeURIComponent;

function requiredUser(name: string, v: Values): string {
  const user = v['user-id'];
  if (user === undefined || user === '') throw new UserError(`admin ${name}: --user-id is required\n${HELP}`);
  return user;
}

/** A JSON object given inline or as `@FILE`. */
function jsonObject(flag: string, value: string): Record<string, unknown> {
  let text = value;
  if (value.startsWith('@')) {
    try {
      text = readFileSync(value.slice(1), 'utf8');
    } catch {
      throw new UserError(`${flag} ${value}: not found or not readable`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UserError(`${flag}: not valid JSON (${(err as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UserError(`${flag}: must be a JSON object`);
  return parsed as Record<string, unknown>;
}

function oneOf(flag: string, value: string | undefined, allowed: readonly string[]): string | undefined {
  if (value !== undefined && !allowed.includes(value))
    throw new UserError(`${flag} ${JSON.stringify(value)}: must be one of ${allowed.join(', ')}`);
  return value;
}

function isoTime(flag: string, value: string | undefined): string | undefined {
  if (value !== undefined && Number.isNaN(Date.parse(value)))
    throw new UserError(
      `${flag} ${JSON.stringify(value)}: must be an ISO 8601 time (e.g. 2025-01-31T12:00:00Z)`,
    );
  return value;
}

/** --limit within `max`, the largest page the listing's route serves: 1000 for most, 200 for some. */
function limit(value: string | undefined, max: number): string | undefined {
  if (value !== undefined && (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > max))
    throw new UserError(`--limit ${JSON.stringify(value)}: must be a whole number from 1 to ${max}`);
  return value;
}

/** --ttl as the enrolment-code route's ttl_seconds, within the range that route accepts. */
function enrolmentTtlSeconds(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDuration(value, '--ttl');
  if (ms < MIN_ENROLMENT_TTL_MS || ms > MAX_ENROLMENT_CODE_TTL_MS)
    throw new UserError(
      `--ttl ${JSON.stringify(value)}: must be from ${formatDuration(MIN_ENROLMENT_TTL_MS)} to ${formatDuration(MAX_ENROLMENT_CODE_TTL_MS)}`,
    );
  return ms / 1000;
}
