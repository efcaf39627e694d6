/**
 * Readable output of the admin CLI: tables and summaries of operator API replies. Replies are
 * read defensively (a missing field prints as "-"), and every string is stripped of control
 * characters first: agent names and reasons come from agents, not from the operator.
 */

type Json = Readonly<Record<string, unknown>>;

export function rec(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

export function list(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

/** One display cell: plain text, one line, `-` for nothing. */
export function cell(value: unknown): string {
  if (value === undefined || value === null || value === '') return '-';
  const s =
    typeof value === 'string'
      ? value
      : typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : JSON.stringify(value);
  // eslint-disable-next-line no-control-regex -- terminal escapes in agent-supplied text are the point
  return s.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, ' ');
}

/** ISO time without milliseconds. */
function time(value: unknown): string {
  return typeof value === 'string' ? cell(value.replace(/\.\d{3}Z$/, 'Z')) : cell(value);
}

function names(value: unknown): string {
  const items = list(value).map((v) => (typeof v === 'string' ? v : cell(rec(v).name ?? rec(v).capability)));
  return items.length ? cell(items.join(', ')) : '-';
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

function fields(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}`).join('\n');
}

function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The hint to the next page of a paged listing (issue 17), or nothing on the last one. */
function more(reply: unknown): string {
  const next = rec(reply).next_cursor;
  return typeof next === 'string' ? `; more with --cursor ${cell(next)}` : '';
}

export function approvalsText(reply: unknown): string {
  const approvals = list(rec(reply).approvals).map(rec);
  if (!approvals.length) return 'no pending approvals';
  const rows = approvals.map((a) => [
    cell(a.id),
    cell(a.kind),
    cell(a.agent_id),
    cell(a.agent_name),
    cell(a.host_id),
    cell(a.user_code),
    time(a.expires_at),
    cell(
      list(a.capabilities)
        .map(rec)
        .map((c) => `${cell(c.name)}${c.constraints ? ' (constrained)' : ''}`)
        .join(', '),
    ),
  ]);
  const header = ['ID', 'KIND', 'AGENT', 'AGENT NAME', 'HOST', 'USER CODE', 'EXPIRES', 'CAPABILITIES'];
  return `${table(header, rows)}\n\n${count(approvals.length, 'pending approval')}${more(reply)}`;
}

export function decisionText(verb: 'approved' | 'denied', reply: unknown): string {
  const r = rec(reply);
  const agent = rec(r.agent);
  const lines = [
    `${verb} ${cell(r.id)}: agent ${cell(agent.agent_id)} (${cell(agent.name)}) is ${cell(agent.status)}`,
  ];
  if (r.approved !== undefined) lines.push(`granted: ${names(r.approved)}`);
  lines.push(`denied:  ${names(r.denied)}`);
  return lines.join('\n');
}

export function hostsText(reply: unknown): string {
  const hosts = list(rec(reply).hosts).map(rec);
  if (!hosts.length) return 'no hosts';
  const rows = hosts.map((h) => [
    cell(h.host_id),
    cell(h.status),
    cell(h.user_id),
    time(h.last_used_at),
    cell(h.name),
    names(h.default_capabilities),
  ]);
  const header = ['HOST ID', 'STATUS', 'USER', 'LAST USED', 'NAME', 'DEFAULT CAPABILITIES'];
  return `${table(header, rows)}\n\n${count(hosts.length, 'host')}${more(reply)}`;
}

export function hostText(reply: unknown): string {
  const h = rec(reply);
  const out = [
    fields([
      ['host', cell(h.host_id)],
      ['name', cell(h.name)],
      ['status', cell(h.status)],
      ['user', cell(h.user_id)],
      ['thumbprint', cell(h.thumbprint)],
      ['default capabilities', names(h.default_capabilities)],
      ['pre-registered', h.pre_registered === true ? 'yes' : 'no'],
      ['activated', time(h.activated_at)],
      ['last used', time(h.last_used_at)],
      ['created', time(h.created_at)],
      ['updated', time(h.updated_at)],
    ]),
  ];
  if (h.agents !== undefined) {
    const agents = list(h.agents).map(rec);
    const rows = agents.map((a) => [cell(a.agent_id), cell(a.status), cell(a.mode), cell(a.name)]);
    out.push(agents.length ? table(['AGENT ID', 'STATUS', 'MODE', 'NAME'], rows) : 'no agents');
  }
  return out.join('\n\n');
}

export function hostChangeText(action: 'linked' | 'unlinked' | 'revoked', reply: unknown): string {
  const h = rec(reply);
  const id = cell(h.host_id);
  if (action === 'linked')
    return `linked host ${id} to ${cell(h.user_id)}; ${count(Number(h.agents_claimed ?? 0), 'autonomous agent')} claimed`;
  if (action === 'unlinked')
    return `unlinked host ${id}; ${count(Number(h.agents_revoked ?? 0), 'delegated agent')} revoked`;
  return `revoked host ${id}; ${count(Number(h.agents_revoked ?? 0), 'agent')} revoked`;
}

export function agentsText(reply: unknown): string {
  const agents = list(rec(reply).agents).map(rec);
  if (!agents.length) return 'no agents';
  const rows = agents.map((a) => [
    cell(a.agent_id),
    cell(a.status),
    cell(a.mode),
    cell(a.host_id),
    cell(a.user_id),
    time(a.created_at),
    cell(a.name),
  ]);
  const header = ['AGENT ID', 'STATUS', 'MODE', 'HOST ID', 'USER', 'CREATED', 'NAME'];
  return `${table(header, rows)}\n\n${count(agents.length, 'agent')}${more(reply)}`;
}

export function agentText(reply: unknown): string {
  const a = rec(reply);
  const grants = list(a.agent_capability_grants).map(rec);
  const rows = grants.map((g) => [
    cell(g.capability),
    cell(g.status),
    cell(g.granted_by),
    time(g.expires_at),
    cell(g.constraints ?? g.reason),
  ]);
  return [
    fields([
      ['agent', cell(a.agent_id)],
      ['name', cell(a.name)],
      ['status', cell(a.status)],
      ['mode', cell(a.mode)],
      ['host', `${cell(a.host_id)}${a.host_name ? ` (${cell(a.host_name)})` : ''}`],
      ['user', cell(a.user_id)],
      ['created', time(a.created_at)],
      ['activated', time(a.activated_at)],
      ['last used', time(a.last_used_at)],
      ['expires', time(a.expires_at)],
    ]),
    grants.length
      ? table(['CAPABILITY', 'STATUS', 'GRANTED BY', 'EXPIRES', 'CONSTRAINTS / REASON'], rows)
      : 'no grants',
  ].join('\n\n');
}

export function activityText(reply: unknown): string {
  const r = rec(reply);
  const rows = list(r.activity)
    .map(rec)
    .map((e) => [
      cell(e.id),
      time(e.at),
      cell(e.type),
      cell(e.outcome),
      cell(e.agent_id),
      cell(e.capability),
      cell(e.upstream_status),
      e.latency_ms === undefined ? '-' : `${cell(e.latency_ms)} ms`,
      e.detail === undefined ? '-' : cell(e.detail).slice(0, 100),
    ]);
  if (!rows.length) return 'no activity';
  const header = ['ID', 'AT', 'TYPE', 'OUTCOME', 'AGENT', 'CAPABILITY', 'UPSTREAM', 'LATENCY', 'DETAIL'];
  const more = typeof r.next_cursor === 'string' ? `; more with --cursor ${cell(r.next_cursor)}` : '';
  return `${table(header, rows)}\n\n${count(rows.length, 'event')}${more}`;
}

/** Per-call approvals (issue 16 §1): one row each, newest first. */
export function perCallsText(reply: unknown): string {
  const r = rec(reply);
  const rows = list(r.per_call_approvals)
    .map(rec)
    .map((c) => [
      cell(c.id),
      cell(c.status),
      cell(c.capability),
      cell(c.agent_id),
      cell(c.user_id),
      time(c.expires_at),
      cell(c.arguments).slice(0, 80),
    ]);
  if (!rows.length) return 'no per-call approvals';
  const header = ['ID', 'STATUS', 'CAPABILITY', 'AGENT', 'ADDRESSEE', 'EXPIRES', 'ARGUMENTS'];
  return `${table(header, rows)}\n\n${count(rows.length, 'call')}${more(r)}`;
}

function passkeyRows(value: unknown): string[][] {
  return list(value)
    .map(rec)
    .map((p) => [cell(p.id), cell(p.name), time(p.created_at), time(p.last_used_at)]);
}

const PASSKEY_HEADER = ['ID', 'NAME', 'ADDED', 'LAST USED'];

/** A user's passkeys, oldest first. */
export function passkeysText(reply: unknown): string {
  const r = rec(reply);
  const rows = passkeyRows(r.passkeys);
  if (!rows.length) return `user ${cell(r.user_id)} has no passkeys`;
  return `${table(PASSKEY_HEADER, rows)}\n\n${count(rows.length, 'passkey')} of user ${cell(r.user_id)}`;
}

/** What `passkeys remove` did: the passkeys gone, and the sessions that ended with them. */
export function passkeysRemovedText(reply: unknown): string {
  const r = rec(reply);
  const rows = passkeyRows(r.removed);
  const ended = typeof r.sessions_ended === 'number' ? r.sessions_ended : 0;
  return [
    `removed ${count(rows.length, 'passkey')} of user ${cell(r.user_id)}; ${count(ended, 'session')} ended`,
    '',
    table(PASSKEY_HEADER, rows),
    '',
    'Their next passkey is enrolled on the account page after a fresh sign-in.',
  ].join('\n');
}

/** A first-passkey enrolment code: printed once, for the operator to hand over out of band. */
export function enrolmentCodeText(reply: unknown): string {
  const r = rec(reply);
  return [
    `enrolment code for user ${cell(r.user_id)}: ${cell(r.enrolment_code)}`,
    `good once, until ${time(r.expires_at)}, for their first passkey.`,
    'Give it to them in person or by phone: never by a channel an agent could read.',
  ].join('\n');
}
