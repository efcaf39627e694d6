/**
 * ajv-formats' `url` format, matched in linear time. Its regular expression (Diego Perini's) takes
 * quadratic time on ECMAScript's backtracking engine: `http://` and 40,000 colons then `@` held the
 * event loop 1.2 s, and a request body of 1 MiB would hold it for minutes. The same expression runs
 * here on RE2, which has no lookahead; the three lookaheads that refuse private IPv4 hosts become a
 * check of the host the match captured. url-format.test.ts holds it to ajv-formats' answers.
 */
import { linearRegExp } from '../util/linear-regexp.js';

const WORD = String.raw`[a-z0-9\u{00a1}-\u{ffff}]+`;
const IPV4 = String.raw`(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))`;
const HOST_NAME = String.raw`(?:${WORD}-)*${WORD}(?:\.(?:${WORD}-)*${WORD})*(?:\.(?:[a-z\u{00a1}-\u{ffff}]{2,}))`;

const URL_SHAPE = linearRegExp(
  String.raw`^(?:https?|ftp):\/\/(?:\S+(?::\S*)?@)?(?:(${IPV4})|${HOST_NAME})(?::\d{2,5})?(?:\/[^\s]*)?$`,
  'iu',
);

/** The hosts ajv-formats' lookaheads refuse; tried on the captured host alone (≤ 15 characters). */
const PRIVATE_IPV4 =
  /^(?:(?:10|127)(?:\.\d{1,3}){3}|(?:169\.254|192\.168)(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})/;

export function isUrl(text: string): boolean {
  const match = URL_SHAPE.exec(text);
  if (!match) return false;
  const ipv4 = match[1];
  return ipv4 === undefined || !PRIVATE_IPV4.test(ipv4);
}
