/**
 * Keyset pagination of the operator listings (issue 17): `?limit=` (default 100, at most 1000)
 * and `?cursor=` (the `next_cursor` of the previous page, `<created_at>~<id>` as the per-call
 * listing has it), so a large deployment is listed a page at a time, each one range of an index.
 */
import { ProtocolError } from '../errors.js';
import type { ListingPage } from '../storage/types.js';

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** The page a listing request asks for; a malformed `limit` or `cursor` is refused. */
export function pageOf(url: URL): Required<Pick<ListingPage, 'limit'>> & ListingPage {
  const limitParam = url.searchParams.get('limit');
  const limit = limitParam === null ? DEFAULT_PAGE : Number(limitParam);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ProtocolError('invalid_request', `limit must be an integer from 1 to ${MAX_PAGE}.`);
  }
  const cursor = url.searchParams.get('cursor');
  if (cursor === null) return { limit };
  // `<created_at ms>~<id>`: the time has no `~`, so the first one splits.
  const mark = cursor.indexOf('~');
  const createdAt = Number(cursor.slice(0, mark));
  const id = cursor.slice(mark + 1);
  if (mark < 1 || !Number.isSafeInteger(createdAt) || id === '') {
    throw new ProtocolError('invalid_request', 'cursor is not the next_cursor of a previous page.');
  }
  return { limit, after: { createdAt, id } };
}

/** The cursor of the page after `rows` when it was full (there may be more), else null. */
export function nextCursor(
  rows: readonly { readonly createdAt: number; readonly id: string }[],
  limit: number,
): { next_cursor: string | null } {
  const last = rows[rows.length - 1];
  return { next_cursor: rows.length === limit && last ? `${last.createdAt}~${last.id}` : null };
}
