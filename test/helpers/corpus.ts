/** The shared real-world OpenAPI corpus (read in place: its licences differ from ours). */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CORPUS_DIR = fileURLToPath(new URL('../../../shared/openapi-corpus/', import.meta.url));

export interface CorpusDocument {
  readonly id: string;
  readonly entry: string;
  readonly flavour: string;
}

export function corpusDocuments(): CorpusDocument[] {
  const index = JSON.parse(readFileSync(`${CORPUS_DIR}corpus.json`, 'utf8')) as {
    documents: CorpusDocument[];
  };
  return index.documents;
}
