/**
 * `agent-auth-proxy check`: everything start-up validates (config, secrets, OpenAPI documents,
 * policy, upstream URLs and credentials), without opening the database or a port, for CI
 * pipelines and `ExecStartPre`. The same loaders start-up uses, so a check that passes means a
 * start that gets past its validation.
 */
import { loadServedCatalog } from './app.js';
import type { Settings } from './config/settings.js';
import { UserError } from './errors.js';
import { defaultPolicy, loadPolicyFile } from './policy/policy.js';
import { resolveBaseUrl } from './upstream/base-url.js';
import { UpstreamClient } from './upstream/client.js';
import { Executor } from './upstream/executor.js';
import { OAuthTokens } from './upstream/oauth.js';
import { systemClock } from './clock.js';

export interface CheckReport {
  readonly apis: number;
  readonly capabilities: number;
  /** The policy file checked, or null for the built-in policy. */
  readonly policy: string | null;
  /** What start-up would log as warnings (e.g. an API without an upstream). */
  readonly warnings: readonly string[];
}

/** Validates what `serve` with these settings would load; throws a UserError naming every problem. */
export async function checkSettings(settings: Settings): Promise<CheckReport> {
  const { catalog } = await loadServedCatalog(settings);
  if (settings.policyFile) loadPolicyFile(settings.policyFile, catalog);
  else defaultPolicy(catalog);
  const execution = new Map(catalog.apis.map((api, i) => [api.id, settings.apis[i]?.execution]));
  const baseUrls = new Map(
    catalog.apis.map((api, i) => [
      api.id,
      resolveBaseUrl(api, execution.get(api.id)?.serverVariables ?? {}, `apis[${i}] (${api.id})`),
    ]),
  );
  const client = new UpstreamClient();
  // Built as start-up builds it, for its credential and header checks; it sends nothing.
  const executor = new Executor({
    catalog,
    settings: new Map([...execution].flatMap(([id, e]) => (e ? [[id, e] as const] : []))),
    // The mock upstream answers every API on a port of its own, chosen when it starts.
    baseUrlFor: (id) => (settings.mockUpstream ? `http://127.0.0.1/${id}` : baseUrls.get(id)),
    client,
    oauth: new OAuthTokens(systemClock, client.dispatcher),
    requestIdHeader: settings.requestIdHeader,
  });
  const problems = executor.problems(catalog);
  await executor.close(); // closes the client too
  if (problems.errors.length > 0) throw new UserError(problems.errors.join('\n'));
  return {
    apis: catalog.apis.length,
    capabilities: catalog.capabilities.length,
    policy: settings.policyFile ?? null,
    warnings: [...catalog.warnings, ...problems.warnings],
  };
}
