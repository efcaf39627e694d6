/**
 * Reading a bundled OpenAPI document: its flavour, info, servers, security schemes and the
 * operations it declares. Structural problems that make the document unusable are UserErrors that
 * name the source and the JSON pointer.
 */
import { UserError } from '../errors.js';
import { isObject, resolvePointer, scalarText, toPointer } from './pointer.js';
import type {
  HttpMethod,
  ParameterLocation,
  SecuritySchemeInfo,
  ServerTemplate,
  SpecFlavour,
} from './types.js';
import { HTTP_METHODS } from './types.js';

export interface RawOperation {
  readonly method: HttpMethod;
  readonly path: string;
  readonly operation: Record<string, unknown>;
  readonly pathItem: Record<string, unknown>;
  readonly pointer: string;
}

export interface DocumentView {
  readonly source: string;
  readonly doc: Record<string, unknown>;
  readonly flavour: SpecFlavour;
}

export function inspectDocument(source: string, doc: unknown): DocumentView {
  if (!isObject(doc)) throw new UserError(`${source}: the document is not an object`);
  const flavour = detectFlavour(source, doc);
  if (!isObject(doc.info)) throw new UserError(`${source}: #/info is missing or not an object`);
  if (doc.paths !== undefined && !isObject(doc.paths))
    throw new UserError(`${source}: #/paths must be an object`);
  return { source, doc, flavour };
}

function detectFlavour(source: string, doc: Record<string, unknown>): SpecFlavour {
  const swagger = doc.swagger;
  const openapi = doc.openapi;
  if (typeof swagger === 'string') {
    if (swagger === '2.0') return 'swagger-2.0';
    throw new UserError(`${source}: #/swagger: unsupported version "${swagger}" (expected "2.0")`);
  }
  if (typeof openapi === 'string') {
    if (/^3\.0\.\d+/.test(openapi)) return 'openapi-3.0';
    if (/^3\.1\.\d+/.test(openapi)) return 'openapi-3.1';
    throw new UserError(`${source}: #/openapi: unsupported version "${openapi}" (expected 3.0.x or 3.1.x)`);
  }
  throw new UserError(
    `${source}: not an OpenAPI document: neither "openapi" nor "swagger" is set at the top level`,
  );
}

/** Follows `$ref`s of non-schema objects (path items, parameters, request bodies, responses). */
export function deref(view: DocumentView, node: unknown, where: string): unknown {
  let current = node;
  for (let hops = 0; isObject(current) && typeof current.$ref === 'string'; hops++) {
    if (hops >= 32) throw new UserError(`${view.source}: ${where}: $ref chain too long or circular`);
    const next = resolvePointer(view.doc, current.$ref);
    if (next === undefined)
      throw new UserError(`${view.source}: ${where}: $ref "${current.$ref}" points to nothing`);
    current = next;
  }
  return current;
}

export function listOperations(view: DocumentView): RawOperation[] {
  const paths = isObject(view.doc.paths) ? view.doc.paths : {};
  const out: RawOperation[] = [];
  for (const [path, rawItem] of Object.entries(paths)) {
    if (!path.startsWith('/')) continue; // `x-` extensions and other non-path keys
    const where = toPointer(['paths', path]);
    const pathItem = deref(view, rawItem, where);
    if (!isObject(pathItem)) throw new UserError(`${view.source}: ${where}: path item must be an object`);
    for (const method of HTTP_METHODS) {
      const operation = pathItem[method];
      if (operation === undefined) continue;
      const pointer = toPointer(['paths', path, method]);
      if (!isObject(operation))
        throw new UserError(`${view.source}: ${pointer}: operation must be an object`);
      out.push({ method, path, operation, pathItem, pointer });
    }
  }
  // Sorted so that naming and collision suffixes never depend on the order of `paths`.
  return out.sort((a, b) =>
    a.path < b.path
      ? -1
      : a.path > b.path
        ? 1
        : HTTP_METHODS.indexOf(a.method) - HTTP_METHODS.indexOf(b.method),
  );
}

export function documentServers(view: DocumentView): ServerTemplate[] {
  if (view.flavour === 'swagger-2.0') {
    const host = typeof view.doc.host === 'string' ? view.doc.host : undefined;
    const basePath = typeof view.doc.basePath === 'string' ? view.doc.basePath : '';
    if (!host) return basePath ? [{ url: basePath, variables: {} }] : [];
    const schemes =
      Array.isArray(view.doc.schemes) && view.doc.schemes.length > 0 ? view.doc.schemes : ['https'];
    return schemes
      .filter((s): s is string => typeof s === 'string')
      .map((s) => ({ url: `${s}://${host}${basePath}`, variables: {} }));
  }
  return readServers(view.doc.servers) ?? [];
}

export function readServers(value: unknown): ServerTemplate[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const out: ServerTemplate[] = [];
  for (const server of value) {
    if (!isObject(server) || typeof server.url !== 'string') continue;
    const variables: Record<string, { default: string; enum?: string[] }> = {};
    if (isObject(server.variables)) {
      for (const [name, v] of Object.entries(server.variables)) {
        if (!isObject(v)) continue;
        const entry: { default: string; enum?: string[] } = { default: scalarText(v.default) };
        if (Array.isArray(v.enum)) entry.enum = v.enum.map(String);
        variables[name] = entry;
      }
    }
    out.push({ url: server.url, variables });
  }
  return out.length > 0 ? out : undefined;
}

export function securitySchemes(view: DocumentView): Record<string, SecuritySchemeInfo> {
  const raw =
    view.flavour === 'swagger-2.0'
      ? view.doc.securityDefinitions
      : isObject(view.doc.components)
        ? view.doc.components.securitySchemes
        : undefined;
  const out: Record<string, SecuritySchemeInfo> = {};
  if (!isObject(raw)) return out;
  for (const [name, value] of Object.entries(raw)) {
    const scheme = deref(view, value, toPointer(['components', 'securitySchemes', name]));
    if (!isObject(scheme) || typeof scheme.type !== 'string') continue;
    const info: { type: string; in?: ParameterLocation; name?: string; scheme?: string; tokenUrl?: string } =
      {
        type: scheme.type,
      };
    const tokenUrl = clientCredentialsTokenUrl(scheme);
    if (tokenUrl !== undefined) info.tokenUrl = tokenUrl;
    if (scheme.type === 'apiKey' && typeof scheme.name === 'string' && isLocation(scheme.in)) {
      info.in = scheme.in;
      info.name = scheme.name;
    }
    if (scheme.type === 'basic') info.scheme = 'basic'; // Swagger 2.0
    if (typeof scheme.scheme === 'string') info.scheme = scheme.scheme.toLowerCase();
    out[name] = info;
  }
  return out;
}

/** OpenAPI 3 `flows.clientCredentials.tokenUrl`, or Swagger 2.0's `flow: application`. */
function clientCredentialsTokenUrl(scheme: Record<string, unknown>): string | undefined {
  if (scheme.type !== 'oauth2') return undefined;
  if (scheme.flow === 'application' && typeof scheme.tokenUrl === 'string') return scheme.tokenUrl;
  const flows = scheme.flows;
  if (isObject(flows) && isObject(flows.clientCredentials)) {
    const url = flows.clientCredentials.tokenUrl;
    if (typeof url === 'string') return url;
  }
  return undefined;
}

export function isLocation(value: unknown): value is ParameterLocation {
  return value === 'path' || value === 'query' || value === 'header' || value === 'cookie';
}
