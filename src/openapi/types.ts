/**
 * The capability catalog's data model. The OpenAPI layer produces these; the HTTP, protocol and
 * upstream layers consume them. Nothing here imports from other layers.
 */

/** A JSON Schema (2020-12) object as produced by the deriver. */
export type JsonSchema = { [keyword: string]: unknown };

export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';
export const HTTP_METHODS: readonly HttpMethod[] = [
  'get',
  'put',
  'post',
  'delete',
  'options',
  'head',
  'patch',
  'trace',
];

export type ParameterLocation = 'path' | 'query' | 'header' | 'cookie';

/** Where one input argument goes in the upstream request, and how it is serialized (OpenAPI 3 terms). */
export interface ParameterBinding {
  /** Property name in the capability's flattened input object. */
  readonly argument: string;
  readonly in: ParameterLocation;
  /** The parameter's name on the wire. */
  readonly name: string;
  readonly required: boolean;
  /** OpenAPI `style` with the location's default filled in (Swagger 2 `collectionFormat` mapped). */
  readonly style: string;
  readonly explode: boolean;
  readonly allowReserved: boolean;
  /** Set when the parameter is declared with `content` instead of `schema` (serialized as that media type). */
  readonly contentType?: string;
}

export interface BodyBinding {
  /** Every media type the operation accepts, in the order the proxy prefers them. */
  readonly mediaTypes: readonly string[];
  /** The media type the input schema was derived from and the proxy will send. */
  readonly mediaType: string;
  readonly required: boolean;
  /**
   * `flattened`: the body's top-level fields are top-level input properties (listed in `fields`).
   * `wrapped`: the whole body is the input property named `argument`.
   */
  readonly mode: 'flattened' | 'wrapped';
  readonly argument?: string;
  readonly fields: readonly string[];
  /** Input fields carried as base64 strings that are sent as bytes (file parts, octet-stream bodies). */
  readonly binaryFields: readonly string[];
  /** Per-field `encoding` of multipart and form bodies (content type, style, explode). */
  readonly encoding: Readonly<Record<string, { contentType?: string; style?: string; explode?: boolean }>>;
  /**
   * A flattened body's `minProperties`/`maxProperties`: how many of its fields a call may send.
   * Not expressible on the input schema, whose properties hold the parameters too.
   */
  readonly fieldCount?: { readonly min?: number; readonly max?: number };
}

export interface ServerTemplate {
  readonly url: string;
  readonly variables: Readonly<Record<string, { default: string; enum?: readonly string[] }>>;
}

/** One alternative of an OpenAPI `security` requirement: scheme name → scopes. */
export type SecurityRequirement = Readonly<Record<string, readonly string[]>>;

/** What the proxy needs to call the upstream operation; never shown to agents. */
export interface OperationBinding {
  readonly apiId: string;
  readonly method: HttpMethod;
  /** Path template exactly as in the document, e.g. `/pets/{petId}`. */
  readonly path: string;
  readonly operationId?: string;
  readonly parameters: readonly ParameterBinding[];
  readonly body?: BodyBinding;
  readonly servers: readonly ServerTemplate[];
  readonly security: readonly SecurityRequirement[];
  readonly tags: readonly string[];
  readonly deprecated: boolean;
  /** Media types of the success responses, for content negotiation (`Accept`). */
  readonly responseMediaTypes: readonly string[];
  /**
   * The first declared 2xx response: its status, media type (absent for an empty body), the
   * document's example when it has one, and the converted schema of that media type.
   */
  readonly success: SuccessResponse;
  /** JSON pointer of the operation in its document, for messages. */
  readonly pointer: string;
}

export interface SuccessResponse {
  readonly status: number;
  readonly mediaType?: string;
  readonly example?: unknown;
  readonly schema?: JsonSchema;
}

export interface Capability {
  /** Stable agent-facing name, `[a-z0-9_]{1,64}` (§2.14). */
  readonly name: string;
  readonly description: string;
  /** Advertised input schema; absent when the operation takes no arguments (§5.2.1). */
  readonly input?: JsonSchema;
  readonly output?: JsonSchema;
  /**
   * The schema execution validates arguments against. Always an object schema, even when `input`
   * is absent (then it accepts only `{}`).
   */
  readonly argumentsSchema: JsonSchema;
  readonly operation: OperationBinding;
}

export interface SecuritySchemeInfo {
  readonly type: string;
  /** For `apiKey`: where the key goes and under which name. */
  readonly in?: ParameterLocation;
  readonly name?: string;
  /** For `http`: `basic`, `bearer`, … */
  readonly scheme?: string;
  /** For `oauth2` with a client-credentials flow: where tokens are fetched. */
  readonly tokenUrl?: string;
}

export interface ApiInfo {
  readonly id: string;
  readonly title: string;
  readonly description?: string;
  readonly version: string;
  /** Where the document came from (file path or URL). */
  readonly source: string;
  readonly flavour: SpecFlavour;
  /** Operator-configured base URL; when absent, execution uses `servers`. */
  readonly upstream?: string;
  readonly servers: readonly ServerTemplate[];
  readonly securitySchemes: Readonly<Record<string, SecuritySchemeInfo>>;
}

export type SpecFlavour = 'swagger-2.0' | 'openapi-3.0' | 'openapi-3.1';
