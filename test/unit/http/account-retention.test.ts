/**
 * §9.2: the account page tells the user how long activity records are kept (`audit.retention`),
 * in words: whole days, hours or minutes, and when nothing is deleted.
 */
import { describe, expect, it } from 'vitest';
import { agentsSection } from '../../../src/http/views/account-agents.js';
import type { SessionRecord } from '../../../src/storage/types.js';

const EMPTY = { hosts: [], moreHosts: false, agents: [], total: 0, page: 1, pages: 1 };
const SESSION = { csrfToken: 'csrf' } as SessionRecord;

function retention(ms: number | null): string {
  const html = agentsSection(EMPTY, SESSION, ms);
  return /<p id="retention">([^<]*)<\/p>/.exec(html)?.[1] ?? '';
}

describe('the retention line of the account page', () => {
  it.each([
    [90 * 86_400_000, 'after 90 days.'],
    [86_400_000, 'after 1 day.'],
    [36 * 3_600_000, 'after 36 hours.'],
    [90 * 60_000, 'after 90 minutes.'],
    [90_500, 'after 91 seconds.'],
  ])('%i ms reads "%s"', (ms, words) => {
    expect(retention(ms)).toBe(
      `This server deletes activity records ${words} You may delete an agent's records sooner below.`,
    );
  });

  it('null (audit.retention: null) says records are kept until deleted', () => {
    expect(retention(null)).toMatch(/^This server keeps activity records until they are deleted\./);
  });
});
