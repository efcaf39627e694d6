/**
 * `agent-auth-proxy check`: everything start-up validates (config, secrets, OpenAPI documents,
 * policy, upstream URLs and credentials), without opening the database or a port, for CI
 * pipelines and `ExecStartPre`. The same loaders and engine builder start-up uses, so a check
 * that passes means a start that gets past its validation.
 */
import { loadServedCatalog } from './start/served-catalog.js';
import { systemClock } from './clock.js';
import type { Settings } from './config/settings.js';
import { buildEngine } from './engine.js';
import { SchemaCompilers } from './protocol/argument-validators.js';
import { defaultPolicy, loadPolicyFile } from './policy/policy.js';
import { UpstreamClient } from './upstream/client.js';
import { OAuthTokens } from './upstream/oauth.js';

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
  const { catalog, formats } = await loadServedCatalog(settings);
  if (settings.policyFile) loadPolicyFile(settings.policyFile, catalog);
  else defaultPolicy(catalog);
  // Built as start-up builds it, for its credential and header checks; it sends nothing.
  const client = new UpstreamClient();
  try {
    const engine = buildEngine(settings, catalog, formats, {
      client,
      oauth: new OAuthTokens(systemClock, client.dispatcher),
      // The mock upstream answers every API on a port of its own, chosen when it starts.
      ...(settings.mockUpstream ? { mockUrlFor: (id: string) => `http://127.0.0.1/${id}` } : {}),
      observeUpstream: () => undefined,
      compilers: new SchemaCompilers(),
    });
    return {
      apis: catalog.apis.length,
      capabilities: catalog.capabilities.length,
      policy: settings.policyFile ?? null,
      warnings: [...catalog.warnings, ...engine.warnings],
    };
  } finally {
    await client.close();
  }
}
