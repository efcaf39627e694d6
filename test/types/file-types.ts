/**
 * Compile-time checks (run by `npm run lint`, which type-checks test/): the config and policy
 * file types are derived from their JSON Schemas, so a schema edit changes the types. These pin
 * the derivation itself: a keyword the deriver does not understand turns a type into `unknown`
 * and would otherwise make every reader of that key silently untyped.
 */
import { expectTypeOf } from 'vitest';
import type { FileConfig, SecretConfig } from '../../src/config/schema.js';
import type { CapabilityListItem, CapabilityRateLimitsFile, PolicyFile } from '../../src/policy/types.js';
import type { LogLevel } from '../../src/log.js';
import type { OperationSelector } from '../../src/openapi/selectors.js';

type HttpMethod = 'GET' | 'PUT' | 'POST' | 'DELETE' | 'OPTIONS' | 'HEAD' | 'PATCH' | 'TRACE';

// Defaulted keys are present after ajv filled them in; keys without a default stay optional.
expectTypeOf<FileConfig['server']['port']>().toEqualTypeOf<number>();
expectTypeOf<FileConfig['server']['trusted_proxies']>().toEqualTypeOf<string[]>();
expectTypeOf<FileConfig['server']['issuer']>().toEqualTypeOf<string | undefined>();
expectTypeOf<FileConfig['execution']['timeout']>().toEqualTypeOf<string | number>();
// The logger's levels and the schema's enum are one list.
expectTypeOf<FileConfig['log_level']>().toEqualTypeOf<LogLevel>();
expectTypeOf<SecretConfig>().toEqualTypeOf<string | { env?: string; file?: string; value?: string }>();
expectTypeOf<FileConfig['apis'][number]['include']>().toEqualTypeOf<
  { tags?: string[]; methods?: HttpMethod[]; operation_ids?: string[]; paths?: string[] }[] | undefined
>();
expectTypeOf<NonNullable<FileConfig['apis'][number]['include']>[number]>().toExtend<OperationSelector>();

// if/then/else in the policy schema (kept for its clearer errors) is understood by the deriver.
expectTypeOf<CapabilityListItem>().toExtend<string | OperationSelector>();
expectTypeOf<CapabilityRateLimitsFile>().toEqualTypeOf<
  | string
  | null
  | { global?: string | null; per_agent?: string | null; per_host?: string | null; per_user?: string | null }
>();
expectTypeOf<PolicyFile['hosts'][number]['public_key']['x']>().toEqualTypeOf<string>();
expectTypeOf<PolicyFile['rate_limits']['in_flight_total']>().toEqualTypeOf<number | null>();
expectTypeOf<PolicyFile['approval']['verification_uri']>().toEqualTypeOf<string | null>();
