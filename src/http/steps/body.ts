/** The body step: the request's JSON object, read only now that the caller is known and within limits. */
import { readJsonObject } from '../body.js';
import { step, type SharedStep } from '../pipeline.js';

export function jsonBody(maxBytes: number, options: { optional?: boolean } = {}): SharedStep {
  return step('body', async (x) => {
    x.body = await readJsonObject(x.req, maxBytes, options);
  });
}
