/**
 * URLs as messages and logs may show them. A spec URL may carry a token in its query
 * (`?private_token=…`, `?access_token=…`: how some hosts serve private documents), and any URL may
 * carry `user:password@`. Both are masked; the parameter names stay, so the operator can still
 * tell which URL is meant. The fragment is dropped.
 */
export function shownUrl(text: string): string {
  const url = URL.parse(text);
  if (url === null) return maskUrlsIn(text);
  // Nothing to mask: shown as written, not as the URL parser normalises it.
  if (!/[@?#]/.test(text)) return text;
  url.hash = '';
  const query = url.search;
  url.search = '';
  const base =
    url.username !== '' || url.password !== '' ? url.href.replace(/\/\/[^/@]*@/, '//…@') : url.href;
  if (query === '') return base;
  const names = query
    .slice(1)
    .split('&')
    .map((pair) => (pair.includes('=') ? `${pair.slice(0, pair.indexOf('='))}=…` : '…'))
    .join('&');
  return `${base}?${names}`;
}

/** Every http(s) URL in `text` (a message that quotes URLs it did not build) through shownUrl. */
export function maskUrlsIn(text: string): string {
  return text.replace(/https?:\/\/[^\s"'<>)]+/gi, (found) =>
    /[@?#]/.test(found) ? shownUrlOrMasked(found) : found,
  );
}

function shownUrlOrMasked(found: string): string {
  const url = URL.parse(found);
  if (url === null) return found.replace(/\/\/[^/?#]*@/, '//…@').replace(/[?#].*$/, '?…');
  return shownUrl(found);
}
