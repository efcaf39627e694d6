/** A two-operation OpenAPI document written to a temp file, for drift and reload tests (issue 12). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A small API: `get_note` and `list_notes`; `noteInput` is get_note's query parameter schema. */
export function notesSpec(
  options: { withList?: boolean; noteInput?: string; summary?: string } = {},
): string {
  const lines = [
    'openapi: 3.0.3',
    'info: { title: Notes, version: 1.0.0 }',
    'paths:',
    '  /notes/{id}:',
    '    get:',
    '      operationId: getNote',
    `      summary: ${options.summary ?? 'Get a note'}`,
    '      parameters:',
    '        - { name: id, in: path, required: true, schema: { type: string } }',
    `        - { name: fields, in: query, schema: ${options.noteInput ?? '{ type: string }'} }`,
    "      responses: { '200': { description: ok, content: { application/json: { schema: { type: object } } } } }",
  ];
  if (options.withList ?? true) {
    lines.push(
      '  /notes:',
      '    get:',
      '      operationId: listNotes',
      '      summary: List notes',
      "      responses: { '200': { description: ok, content: { application/json: { schema: { type: array } } } } }",
    );
  }
  const file = join(mkdtempSync(join(tmpdir(), 'aap-notes-')), 'notes.yaml');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}
