/** The decision record's fields (issue 16 §2): user agents cleaned and capped, absent fields left out. */
import { describe, expect, it } from 'vitest';
import {
  cleanUserAgent,
  constraintTrail,
  MAX_USER_AGENT,
  originDetail,
  originFromSession,
} from '../../../src/protocol/decision-record.js';
import type { GrantRecord, SessionRecord } from '../../../src/storage/types.js';

describe('cleanUserAgent', () => {
  it('removes control and text-direction characters, collapses white space, caps the length', () => {
    expect(cleanUserAgent('Mozilla/5.0\u0000\u001b[31m \u202eevil\r\nX')).toBe('Mozilla/5.0 [31m evil X');
    const long = cleanUserAgent('a'.repeat(1000)) ?? '';
    expect(long).toHaveLength(MAX_USER_AGENT);
    expect(long.endsWith('…')).toBe(true);
    expect(cleanUserAgent(undefined)).toBeNull();
    expect(cleanUserAgent(' \t ')).toBeNull();
    expect(cleanUserAgent(['a', 'b'])).toBe('a b');
  });
});

describe('originDetail', () => {
  const session: SessionRecord = {
    idHash: 'h',
    userId: 'alice@example.com',
    authMethod: 'oidc',
    authenticatedAt: 1,
    acr: 'urn:example:mfa',
    amr: ['pwd', 'otp'],
    csrfToken: 'c',
    createdAt: 1,
    expiresAt: 2,
  };

  it('names the auth method with acr and amr, the client IP, the user agent and the content hash', () => {
    const origin = originFromSession(session, { ip: '192.0.2.1', userAgent: 'UA\u0007' }, 'hash');
    expect(originDetail(origin)).toEqual({
      auth_method: 'oidc',
      acr: 'urn:example:mfa',
      amr: ['pwd', 'otp'],
      client_ip: '192.0.2.1',
      user_agent: 'UA',
      content_hash: 'hash',
    });
  });

  it('leaves out what is not known', () => {
    const password = { ...session, authMethod: 'password' as const, acr: null, amr: null };
    expect(originDetail(originFromSession(password, { ip: '192.0.2.1', userAgent: undefined }, 'h'))).toEqual(
      {
        auth_method: 'password',
        client_ip: '192.0.2.1',
        content_hash: 'h',
      },
    );
    expect(originDetail(undefined)).toEqual({});
  });
});

describe('constraintTrail', () => {
  it('lists proposed, approved and effective constraints per capability (§2.13)', () => {
    const grant = {
      capability: 'list_pets',
      constraints: { limit: { max: 200 } },
      proposedConstraints: { limit: { max: 1000 } },
      approvedConstraints: { limit: { max: 200 } },
    } as Partial<GrantRecord> as GrantRecord;
    expect(constraintTrail([grant])).toEqual({
      list_pets: {
        proposed: { limit: { max: 1000 } },
        approved: { limit: { max: 200 } },
        effective: { limit: { max: 200 } },
      },
    });
  });
});
