/**
 * The large-API corpus (scripts/api-corpus.json), fetched by scripts/fetch-api-corpus.ts when
 * missing (`npm test`'s pretest runs it too), read in place from .cache/api-corpus/.
 */
import { ensureApiCorpus, type FetchedDocument } from '../../scripts/fetch-api-corpus.js';

export function apiCorpusDocument(id: string): FetchedDocument {
  const doc = ensureApiCorpus().find((d) => d.id === id);
  if (!doc) throw new Error(`${id} is not in scripts/api-corpus.json`);
  return doc;
}
