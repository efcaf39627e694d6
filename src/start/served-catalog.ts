/**
 * The catalog as served: every API's document derived, then the operator's pinned arguments and
 * the proxy's own headers removed from the inputs. The `capabilities` command shows exactly this.
 */
import type { Settings } from '../config/settings.js';
import { UserError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import { loadCatalog } from '../openapi/load-catalog.js';
import { pinArguments, PinError } from '../openapi/pins.js';
import { withoutProxyHeaders } from '../openapi/proxy-headers.js';

export async function loadServedCatalog(
  settings: Settings,
): Promise<{ catalog: Catalog; formats: ReadonlySet<string> }> {
  const loaded = await loadCatalog(settings.apis, {
    allowRemoteRefs: settings.allowRemoteRefs,
    allowHttp: settings.allowHttpSpecs,
    fetchLimits: {
      maxBytes: settings.specMaxBytes,
      connectTimeoutMs: settings.specTimeoutMs,
      readTimeoutMs: settings.specTimeoutMs,
    },
  });
  const pins = new Map<string, string[]>();
  for (const api of settings.apis) {
    for (const [name, op] of Object.entries(api.execution.operations)) {
      const pinned = Object.keys(op.pin);
      if (pinned.length > 0) pins.set(name, pinned);
    }
  }
  // Identity and static headers are the proxy's: a header parameter of their name is no input.
  const proxyHeaders = new Map(
    loaded.apis.map((api, i) => {
      const execution = (settings.apis[i] as (typeof settings.apis)[number]).execution;
      return [
        api.id,
        [...Object.keys(execution.headers), ...Object.values(execution.identityHeaders ?? {})],
      ] as const;
    }),
  );
  try {
    return {
      catalog: withoutProxyHeaders(pinArguments(loaded, pins), proxyHeaders),
      formats: loaded.formats,
    };
  } catch (err) {
    if (err instanceof PinError) throw new UserError(`config: operations: ${err.message}`);
    throw err;
  }
}
