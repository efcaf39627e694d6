/**
 * One catalog's execution engine: the executor (API runtimes, base URLs) and the argument
 * validators, both built from the same catalog. Start-up and every reload build one; a reload
 * swaps it whole, so a request never validates against one catalog and calls with another.
 */
import type { ApiExecutionSettings } from './config/api-execution.js';
import type { Settings } from './config/settings.js';
import { UserError } from './errors.js';
import type { ExecutionEngine } from './http/routes/execute.js';
import type { Catalog } from './openapi/catalog.js';
import { CompiledValidators, type SchemaCompilers } from './protocol/argument-validators.js';
import { resolveBaseUrl } from './upstream/base-url.js';
import type { UpstreamClient } from './upstream/client.js';
import { Executor } from './upstream/executor.js';
import type { OAuthTokens } from './upstream/oauth.js';
import type { RetiredSecrets } from './upstream/retired-secrets.js';

/** What outlives an engine: connections, tokens and the mock upstream are shared by all. */
export interface EngineShared {
  readonly client: UpstreamClient;
  readonly oauth: OAuthTokens;
  /** Static secrets replaced by a reload, still redacted for a while (retired-secrets.ts). */
  readonly retired?: RetiredSecrets;
  /** The mock upstream's base URL of an API, when `--mock-upstream` runs one. */
  readonly mockUrlFor?: (apiId: string) => string | undefined;
  readonly observeUpstream: (apiId: string, seconds: number) => void;
  /** Compiled argument schemas, kept across reloads for the schemas that did not change. */
  readonly compilers: SchemaCompilers;
}

export interface BuiltEngine extends ExecutionEngine {
  readonly executor: Executor;
  readonly validators: CompiledValidators;
  readonly upstreamFor: (apiId: string) => string | undefined;
  /** Start-up diagnostics that do not stop it (problems.ts). */
  readonly warnings: readonly string[];
}

/** Throws UserError, naming the API, when the catalog cannot be executed as configured. */
export function buildEngine(
  settings: Settings,
  catalog: Catalog,
  formats: ReadonlySet<string>,
  shared: EngineShared,
): BuiltEngine {
  const executionSettings = new Map<string, ApiExecutionSettings>(
    catalog.apis.map((api, i) => [api.id, (settings.apis[i] as (typeof settings.apis)[number]).execution]),
  );
  const baseUrls = new Map(
    catalog.apis.map((api, i) => [
      api.id,
      resolveBaseUrl(api, executionSettings.get(api.id)?.serverVariables ?? {}, `apis[${i}] (${api.id})`),
    ]),
  );
  const mockUrlFor = shared.mockUrlFor;
  const upstreamFor = (apiId: string): string | undefined =>
    mockUrlFor ? mockUrlFor(apiId) : baseUrls.get(apiId);
  const executor = new Executor({
    catalog,
    settings: executionSettings,
    baseUrlFor: upstreamFor,
    client: shared.client,
    oauth: shared.oauth,
    ...(shared.retired ? { retired: shared.retired } : {}),
    requestIdHeader: settings.requestIdHeader,
    observeUpstream: shared.observeUpstream,
  });
  const problems = executor.problems(catalog);
  if (problems.errors.length > 0) throw new UserError(problems.errors.join('\n'));
  return {
    executor,
    validators: new CompiledValidators(shared.compilers.for(formats)),
    upstreamFor,
    warnings: problems.warnings,
  };
}
