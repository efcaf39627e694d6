/**
 * Which RFC 8628 user code a new approval request gets (§7.1). Usually a fresh one; but a request
 * that replaces an unanswered device request of the same agent (it asked again with other
 * constraints, issue 16) keeps that request's code. Whoever has the code open is then shown the
 * new content, and a decision made on the old page is refused by its content hash (§7.2) rather
 * than landing on a request that no longer exists. The replaced row gets a fresh, never-shown code:
 * codes are unique.
 */
import type { ApprovalRecord, StoreWriter } from '../storage/types.js';
import { generateUserCode } from './user-code.js';

export async function userCodeFor(
  tx: StoreWriter,
  agentId: string,
  superseded: ReadonlySet<string>,
  method: ApprovalRecord['method'],
): Promise<string> {
  const predecessor =
    superseded.size > 0 && method === 'device_authorization'
      ? (await tx.approvals({ status: 'expired', agentId }))
          .filter((a) => superseded.has(a.id) && a.method === 'device_authorization')
          .at(-1)
      : undefined;
  if (!predecessor) return freshCode(tx);
  await tx.updateApproval(predecessor.id, { userCode: await freshCode(tx) });
  return predecessor.userCode;
}

async function freshCode(tx: StoreWriter): Promise<string> {
  let code = generateUserCode();
  while (await tx.approvalByUserCode(code)) code = generateUserCode();
  return code;
}
