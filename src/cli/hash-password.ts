/**
 * `agent-auth-proxy hash-password`: reads a password from stdin (never argv, which other users of
 * the machine can read) and prints the scrypt hash for `sign_in.local.users[].password_hash`.
 */
import { UserError } from '../errors.js';
import { hashPassword } from '../util/password.js';

/** Longer input is a mistake (a file piped in), not a password. */
const MAX_PASSWORD_BYTES = 1024;
const MIN_PASSWORD_CHARS = 8;

export async function runHashPassword(input: AsyncIterable<Buffer | string>): Promise<string> {
  let text = '';
  for await (const chunk of input) {
    text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (Buffer.byteLength(text) > MAX_PASSWORD_BYTES) {
      throw new UserError(`hash-password: the password on stdin is longer than ${MAX_PASSWORD_BYTES} bytes`);
    }
  }
  // One trailing line break is the terminal's or echo's, not the password's.
  const password = text.replace(/\r?\n$/, '');
  if (password.length < MIN_PASSWORD_CHARS) {
    throw new UserError(
      `hash-password: give a password of at least ${MIN_PASSWORD_CHARS} characters on stdin, e.g. read -rs P && printf %s "$P" | agent-auth-proxy hash-password`,
    );
  }
  return hashPassword(password);
}
