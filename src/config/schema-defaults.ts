/**
 * The object a schema's `default`s make of `{}`, without compiling the schema: what ajv's
 * `useDefaults` fills in while validating, here by walking `properties` (and local `$ref`s). Start-up
 * without a config file or a policy file needs only these defaults, and compiling the config and
 * policy schemas for them cost it 0.3 s. Tests check the result equals ajv's for both schemas.
 */
type SchemaNode = Readonly<Record<string, unknown>>;

export function schemaDefaults(root: object): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  fill(root as SchemaNode, root as SchemaNode, data);
  return data;
}

/** ajv's order: a missing property gets a copy of its default, then its own properties are filled. */
function fill(root: SchemaNode, schema: SchemaNode, data: Record<string, unknown>): void {
  const node = resolve(root, schema);
  const properties = node.properties as Readonly<Record<string, SchemaNode>> | undefined;
  if (!properties) return;
  for (const [key, raw] of Object.entries(properties)) {
    // A default beside a `$ref` is the property's own (2020-12 applies both); else the target's.
    const property = resolve(root, raw);
    const source = Object.hasOwn(raw, 'default') ? raw : property;
    if (data[key] === undefined && Object.hasOwn(source, 'default'))
      data[key] = structuredClone(source.default);
    const value = data[key];
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      fill(root, property, value as Record<string, unknown>);
    }
  }
}

/** `#/$defs/name`: the schemas here use no other kind of `$ref`. */
function resolve(root: SchemaNode, schema: SchemaNode): SchemaNode {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const match = /^#\/\$defs\/([^/]+)$/.exec(ref);
  const target = match
    ? (root.$defs as Record<string, SchemaNode> | undefined)?.[match[1] as string]
    : undefined;
  if (!target) throw new Error(`schemaDefaults: unsupported $ref ${ref}`);
  return target;
}
