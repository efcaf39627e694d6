/** Hand-built OperationBinding, ParameterBinding and BodyBinding fixtures, so the serializer tests name each rule they check. */
import type {
  BodyBinding,
  OperationBinding,
  ParameterBinding,
  ParameterLocation,
} from '../../src/openapi/types.js';

/** The OpenAPI default style of each parameter location. */
const DEFAULT_STYLE: Record<ParameterLocation, string> = {
  path: 'simple',
  query: 'form',
  header: 'simple',
  cookie: 'form',
};

/** A parameter bound to the argument of the same name, with its location's default style (`extra` overrides). */
export function param(
  name: string,
  location: ParameterLocation,
  extra: Partial<ParameterBinding> = {},
): ParameterBinding {
  const style = extra.style ?? DEFAULT_STYLE[location];
  return {
    argument: name,
    in: location,
    name,
    required: location === 'path',
    style,
    explode: style === 'form',
    allowReserved: false,
    ...extra,
  };
}

/** What an operation fixture carries besides its shape: the API id and the JSON pointer. */
export interface OpFixture {
  readonly apiId?: string;
  readonly pointer?: string;
}

/** Builds an operation on `path` (`method` default: post with a body, get without). */
export type OpBuilder = (
  path: string,
  parameters?: ParameterBinding[],
  body?: BodyBinding,
  method?: OperationBinding['method'],
) => OperationBinding;

/** An operation builder whose operations have `fixture`'s apiId (default `test`) and pointer (default `/paths/x`). */
export function opWith(fixture: OpFixture = {}): OpBuilder {
  return (path, parameters = [], body, method = body ? 'post' : 'get') => ({
    apiId: fixture.apiId ?? 'test',
    method,
    path,
    parameters,
    ...(body ? { body } : {}),
    servers: [],
    security: [],
    tags: [],
    deprecated: false,
    responseMediaTypes: ['application/json'],
    success: { status: 200 },
    pointer: fixture.pointer ?? '/paths/x',
  });
}

/** An operation of API `test` at pointer `/paths/x`. */
export const op = opWith();

/** A flattened, optional body of `mediaType` with no fields (`extra` overrides). */
export function body(mediaType: string, extra: Partial<BodyBinding> = {}): BodyBinding {
  return {
    mediaTypes: [mediaType],
    mediaType,
    required: false,
    mode: 'flattened',
    fields: [],
    binaryFields: [],
    encoding: {},
    ...extra,
  };
}
