/**
 * Method spoofing: a POST whose form body (or query) carries `_method=DELETE` is routed as a
 * DELETE by Rack::MethodOverride (in every Rails app), Laravel and Symfony (which read `_method`
 * from the body, the query, and in Laravel a JSON body too) and Express's method-override. An
 * agent granted a POST must not reach another operation, one the policy blocks or keeps per-call,
 * that way. So a body or query name the upstream may read as `_method` (parameterAlias: `.method`,
 * `[_method]`, `_METHOD`…) is refused unless its value is the operation's own method. The
 * override headers (`X-HTTP-Method-Override` and kin) are owned by the proxy (parameters.ts).
 *
 * Which parts of an operation can carry such a name is worked out once per operation; an
 * operation with no free-form query object and no form, multipart or wrapped JSON body pays one
 * lookup per call.
 */
import { parameterAlias } from '../openapi/credential-names.js';
import { essence, isJsonLike } from '../openapi/media.js';
import type { OperationBinding, ParameterBinding } from '../openapi/types.js';
import { ownValue } from '../util/own-keys.js';
import { ArgumentError, isAbsent, isPlainObject } from './encoding.js';
import type { UpstreamRequestParts } from './request-parts.js';
import { ownValues } from './sent-values.js';
import { queryPairs } from './styles.js';
import { bodyEntries, formEntries, type WireEntry } from './wire-entries.js';

const OVERRIDE = '_method';
/**
 * No character folds (NFKC, case) into two or more characters of `_method`, so a name shorter
 * than it cannot be read as it: most names are passed over without being folded.
 */
const SHORTEST = OVERRIDE.length;

interface OverridePlan {
  readonly method: string;
  /** Query parameters whose names an agent chooses (exploded objects), or named like `_method`. */
  readonly query: readonly { readonly p: ParameterBinding; readonly named: boolean }[];
  /**
   * `entries`: a form or multipart body, read back whole; `keys`: a wrapped JSON body, whose
   * top-level keys are the agent's; `fields`: flattened JSON fields named like `_method`.
   */
  readonly body: 'none' | 'entries' | 'keys' | 'fields';
  readonly bodyArgument: string;
  readonly fields: readonly string[];
}

const plans = new WeakMap<OperationBinding, OverridePlan | null>();

function planOf(op: OperationBinding): OverridePlan | null {
  const cached = plans.get(op);
  if (cached !== undefined) return cached;
  const query = op.parameters
    .filter((p) => p.in === 'query')
    .map((p) => ({ p, named: readsAsOverride(p.name) }))
    .filter(
      ({ p, named }) => named || (p.explode && p.style !== 'deepObject' && p.contentType === undefined),
    );
  let body: OverridePlan['body'] = 'none';
  let fields: string[] = [];
  const bodyArgument = op.body?.argument ?? op.body?.fields[0] ?? 'body';
  if (op.body) {
    const type = essence(op.body.mediaType);
    if (type === 'application/x-www-form-urlencoded' || type.startsWith('multipart/')) body = 'entries';
    else if (isJsonLike(type)) {
      fields = op.body.mode === 'flattened' ? op.body.fields.filter(readsAsOverride) : [];
      body = op.body.mode === 'wrapped' ? 'keys' : fields.length > 0 ? 'fields' : 'none';
    }
  }
  const plan =
    query.length === 0 && body === 'none'
      ? null
      : { method: op.method.toUpperCase(), query, body, bodyArgument, fields };
  plans.set(op, plan);
  return plan;
}

function readsAsOverride(name: string): boolean {
  return name.length >= SHORTEST && parameterAlias(name) === OVERRIDE;
}

/** Throws ArgumentError naming the argument whose body or query name would override the method. */
export function refuseMethodOverride(
  op: OperationBinding,
  args: Readonly<Record<string, unknown>>,
  parts: UpstreamRequestParts,
): void {
  const plan = planOf(op);
  if (plan === null) return;
  for (const { p, named } of plan.query) {
    const value = ownValue(args, p.argument);
    if (isAbsent(value) || (!named && !isPlainObject(value))) continue;
    const entries = formEntries(queryPairs(p, value, p.argument).join('&'), 'query');
    const found = entries.find((entry) => overrides(plan, entry.name, entry.text));
    if (found) refuse(plan, p.argument, found.name, 'query');
  }
  if (plan.body === 'entries' && parts.body) {
    const found = bodyEntries(parts.body).find((entry) => overrides(plan, entry.name, entry.text));
    if (found) refuse(plan, producer(op, args, plan, found), found.name, 'body');
  } else if (plan.body === 'keys') {
    const value = ownValue(args, plan.bodyArgument);
    if (!isPlainObject(value)) return;
    for (const key in value) {
      if (Object.hasOwn(value, key) && overrides(plan, key, value[key]))
        refuse(plan, plan.bodyArgument, key, 'body');
    }
  } else if (plan.body === 'fields') {
    for (const field of plan.fields) {
      const value = ownValue(args, field);
      if (!isAbsent(value) && overrides(plan, field, value)) refuse(plan, field, field, 'body');
    }
  }
}

/** Whether `name` reads as `_method` with a value other than the operation's own method. */
function overrides(plan: OverridePlan, name: string, value: unknown): boolean {
  if (!readsAsOverride(name)) return false;
  return typeof value !== 'string' || value.toUpperCase() !== plan.method;
}

function refuse(plan: OverridePlan, argument: string, name: string, where: string): never {
  throw new ArgumentError(
    argument,
    `Argument ${argument} would send ${JSON.stringify(name)} (${where}), which servers read as a method override (Rails, Laravel, Symfony: _method); only the operation's own method, ${plan.method}, may be sent there.`,
  );
}

/** Which argument sends a refused form or multipart entry (only asked once one is found). */
function producer(
  op: OperationBinding,
  args: Readonly<Record<string, unknown>>,
  plan: OverridePlan,
  entry: WireEntry,
): string {
  if (op.body?.mode !== 'flattened') return plan.bodyArgument;
  const by = op.body.fields.find((field) =>
    ownValues(op, args, field).some((own) => own.name === entry.name && own.text === entry.text),
  );
  return by ?? plan.bodyArgument;
}
