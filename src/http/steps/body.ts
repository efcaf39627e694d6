/** The body step: the request's JSON object, read only now that the caller is known and within limits. */
import { readJsonObject } from '../body.js';
import { step, type SharedStep } from '../pipeline.js';

export function jsonBody(maxBytes: number, options: { optional?: boolean } = {}): SharedStep {
  return step('body', (x) => {
    // Synchronous when the body has all arrived (body.ts), as a small one mostly has.
    const body = readJsonObject(x.req, maxBytes, options);
    if (!(body instanceof Promise)) {
      x.body = body;
      return undefined;
    }
    return body.then((read) => {
      x.body = read;
    });
  });
}
