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

export function userCodeFor(
  tx: StoreWriter,
  agentId: string,
  superseded: ReadonlySet<string>,
  method: ApprovalRecord['method'],
): string {
  const predecessor =
    superseded.size > 0 && method === 'device_authorization'
      ? tx
          .approvals({ status: 'expired', agentId })
          .filter((a) => superseded.has(a.id) && a.method === 'device_authorization')
          .at(-1)
      : undefined;
  if (!predecessor) return freshCode(tx);
  tx.updateApproval(predecessor.id, { userCode: freshCode(tx) });
  return predecessor.userCode;
}

function freshCode(tx: StoreWriter): string {
  let code = generateUserCode();
  while (tx.approvalByUserCode(code)) code = generateUserCode();
  return code;
}
