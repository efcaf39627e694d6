/**
 * An operator's YAML file (config or policy) as data: every syntax error named with the file and
 * line, duplicate keys refused, and an alias bomb (the yaml library refuses to expand too many
 * aliases) reported as the file's mistake rather than an unexpected error. An empty file is `{}`.
 */
import { parseDocument } from 'yaml';
import { UserError } from '../errors.js';

export function parseYamlText(text: string, file: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new UserError(doc.errors.map((e) => `${file}: ${e.message.split('\n')[0] ?? ''}`).join('\n'));
  }
  try {
    return doc.toJS() ?? {};
  } catch (err) {
    throw new UserError(`${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
