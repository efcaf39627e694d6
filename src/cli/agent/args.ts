/** The agent commands' structured arguments: JSON given inline or as @FILE, capability lists. */
import { readFileSync } from 'node:fs';
import { UserError } from '../../errors.js';

export interface RequestFlags {
  readonly capability?: string[] | undefined;
  readonly constraints?: string | undefined;
}

/** --capability names, each with its entry of --constraints (§2.13) when there is one. */
export function requested(
  v: RequestFlags,
  required: boolean,
): (string | { name: string; constraints: unknown })[] {
  const names = v.capability ?? [];
  if (required && names.length === 0)
    throw new UserError(
      `agent request: --capability is required\nRun agent-auth-proxy agent --help for usage.`,
    );
  const constraints = v.constraints === undefined ? {} : jsonObject('--constraints', v.constraints);
  for (const key of Object.keys(constraints)) {
    if (!names.includes(key))
      throw new UserError(`--constraints names "${key}", which is not one of the --capability names`);
  }
  return names.map((n) => (constraints[n] !== undefined ? { name: n, constraints: constraints[n] } : n));
}

export function oneOf(
  flag: string,
  value: string | undefined,
  allowed: readonly string[],
): string | undefined {
  if (value !== undefined && !allowed.includes(value))
    throw new UserError(`${flag} must be one of ${allowed.join(', ')}`);
  return value;
}

/** A JSON object given inline or as @FILE. */
export function jsonObject(flag: string, value: string): Record<string, unknown> {
  let text = value;
  if (value.startsWith('@')) {
    try {
      text = readFileSync(value.slice(1), 'utf8');
    } catch (err) {
      throw new UserError(`${flag}: cannot read ${value.slice(1)}: ${(err as Error).message}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UserError(`${flag}: not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UserError(`${flag} must be a JSON object`);
  return parsed as Record<string, unknown>;
}
