/**
 * Keyset pagination of the operator listings (issue 17): `?limit=` (default 100, at most 1000)
 * and `?after=` (the `next_after` of the previous page), so a listing of a large deployment is a
 * page at a time, each one range of an index, instead of every row.
 */
import { ProtocolError } from '../errors.js';
import type { ListingPage } from '../storage/types.js';

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** The page a listing request asks for; a malformed `limit` or `after` is refused. */
export function pageOf(url: URL): Required<Pick<ListingPage, 'limit'>> & ListingPage {
  const limitParam = url.searchParams.get('limit');
  const limit = limitParam === null ? DEFAULT_PAGE : Number(limitParam);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ProtocolError('invalid_request', `limit must be an integer from 1 to ${MAX_PAGE}.`);
  }
  const afterParam = url.searchParams.get('after');
  if (afterParam === null) return { limit };
  // `<created_at ms>.<id>`: ids never start with a digit-dot prefix, so the first dot splits.
  const dot = afterParam.indexOf('.');
  const createdAt = Number(afterParam.slice(0, dot));
  const id = afterParam.slice(dot + 1);
  if (dot < 1 || !Number.isSafeInteger(createdAt) || id === '') {
    throw new ProtocolError('invalid_request', 'after is not a cursor (next_after of a previous page).');
  }
  return { limit, after: { createdAt, id } };
}

/** The cursor of the page after `rows`, when it was full (there may be more). */
export function nextAfter(
  rows: readonly { readonly createdAt: number; readonly id: string }[],
  limit: number,
): { next_after?: string } {
  const last = rows[rows.length - 1];
  return rows.length === limit && last ? { next_after: `${last.createdAt}.${last.id}` } : {};
}
