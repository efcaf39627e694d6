/** The operator's mistake a synchronous call throws, for tests that read its message. */
import { expect } from 'vitest';
import { UserError } from '../../src/errors.js';

/** The UserError `fn` throws; the test fails when it throws nothing, or something else. */
export function userError(fn: () => unknown): UserError {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(UserError);
  return thrown as UserError;
}
