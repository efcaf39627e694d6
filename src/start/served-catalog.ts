/**
 * The catalog as served: every API's document derived, then the operator's pinned arguments and
 * the proxy's own headers removed from the inputs. The `capabilities` command shows exactly this.
 */
import type { Settings } from '../config/settings.js';
import { UserError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import {
  loadCatalog,
  loadCatalogReusing,
  type CatalogLoad,
  type LoadedCatalog,
} from '../openapi/load-catalog.js';
import type { LoadOptions } from '../openapi/load.js';
import { pinArguments, PinError } from '../openapi/pins.js';
import { withoutProxyHeaders } from '../openapi/proxy-headers.js';

export interface ServedCatalog {
  readonly catalog: Catalog;
  readonly formats: ReadonlySet<string>;
}

/** The served catalog, loaded once (the `capabilities` and `check` commands). */
export async function loadServedCatalog(settings: Settings): Promise<ServedCatalog> {
  return served(settings, await loadCatalog(settings.apis, loadOptionsOf(settings)));
}

/**
 * The served catalog across reloads (`serve`). Each load keeps what the catalog in force derived
 * of every API whose documents did not change (loadCatalogReusing): a reload of Microsoft Graph's
 * policy had taken 1.8 s and 65 MiB over the catalog in force, to build a catalog equal to it.
 */
export class ServedCatalogs {
  #inForce: CatalogLoad | undefined;
  /** Each catalog handed out, to its load; weak, so that a refused reload's is not kept. */
  readonly #loads = new WeakMap<Catalog, CatalogLoad>();

  async load(
    settings: Settings,
  ): Promise<ServedCatalog & { readonly documentsUnchanged: boolean; readonly keptApis: number }> {
    const load = await loadCatalogReusing(settings.apis, loadOptionsOf(settings), this.#inForce);
    const catalog = served(settings, load.catalog);
    this.#loads.set(catalog.catalog, load);
    return { ...catalog, documentsUnchanged: load.reused, keptApis: load.keptApis };
  }

  /** Told which catalog serves now: the first, a reload's, or the one a failed reload kept. */
  installed(catalog: Catalog): void {
    this.#inForce = this.#loads.get(catalog) ?? this.#inForce;
  }
}

function loadOptionsOf(settings: Settings): LoadOptions {
  return {
    allowRemoteRefs: settings.allowRemoteRefs,
    allowHttp: settings.allowHttpSpecs,
    fetchLimits: {
      maxBytes: settings.specMaxBytes,
      connectTimeoutMs: settings.specTimeoutMs,
      readTimeoutMs: settings.specTimeoutMs,
    },
  };
}

/** The documents' catalog with the operator's pins and the proxy's headers taken out. */
function served(settings: Settings, loaded: LoadedCatalog): ServedCatalog {
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
