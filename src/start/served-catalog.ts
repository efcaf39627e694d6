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
  return served(await loadCatalog(settings.apis, loadOptionsOf(settings)), shapingOf(settings));
}

/**
 * The served catalog across reloads (`serve`). Each load keeps what the catalog in force derived
 * of every API whose documents did not change (loadCatalogReusing): a reload of Microsoft Graph's
 * policy had taken 1.8 s and 65 MiB over the catalog in force, to build a catalog equal to it.
 * When no document changed and the pins and proxy headers are the same too, the served catalog
 * in force is itself kept, so that nothing keyed by it (the mock upstream's prepared answers,
 * drift's comparison) starts over.
 */
export class ServedCatalogs {
  #inForce: Served | undefined;
  /** Each catalog handed out, with what it was served from; weak, so a refused reload's goes. */
  readonly #served = new WeakMap<Catalog, Served>();

  async load(
    settings: Settings,
  ): Promise<ServedCatalog & { readonly documentsUnchanged: boolean; readonly keptApis: number }> {
    const load = await loadCatalogReusing(settings.apis, loadOptionsOf(settings), this.#inForce?.load);
    const shaping = shapingOf(settings);
    const kept = this.#inForce;
    const same = load.reused && kept?.load.catalog === load.catalog && kept.shaping.key === shaping.key;
    const catalog = same ? kept.catalog : served(load.catalog, shaping);
    this.#served.set(catalog.catalog, { load, shaping, catalog });
    return { ...catalog, documentsUnchanged: load.reused, keptApis: load.keptApis };
  }

  /** Told which catalog serves now: the first, a reload's, or the one a failed reload kept. */
  installed(catalog: Catalog): void {
    this.#inForce = this.#served.get(catalog) ?? this.#inForce;
  }
}

/** A served catalog, the load it came from and what shaped it. */
interface Served {
  readonly load: CatalogLoad;
  readonly shaping: Shaping;
  readonly catalog: ServedCatalog;
}

/** What the settings take out of the documents' catalog, and the same as one comparable text. */
interface Shaping {
  /** Capability name → its pinned arguments. */
  readonly pins: ReadonlyMap<string, string[]>;
  /** Per API, in the settings' order: the headers the proxy sets itself. */
  readonly proxyHeaders: readonly (readonly string[])[];
  readonly key: string;
}

function loadOptionsOf(settings: Settings): LoadOptions {
  return {
    allowRemoteRefs: settings.allowRemoteRefs,
    allowLocalRefsAnywhere: settings.allowLocalRefsAnywhere,
    allowHttp: settings.allowHttpSpecs,
    fetchLimits: {
      maxBytes: settings.specMaxBytes,
      connectTimeoutMs: settings.specTimeoutMs,
      readTimeoutMs: settings.specTimeoutMs,
    },
  };
}

function shapingOf(settings: Settings): Shaping {
  const pins = new Map<string, string[]>();
  for (const api of settings.apis) {
    for (const [name, op] of Object.entries(api.execution.operations)) {
      const pinned = Object.keys(op.pin);
      if (pinned.length > 0) pins.set(name, pinned);
    }
  }
  // Identity and static headers are the proxy's: a header parameter of their name is no input.
  const proxyHeaders = settings.apis.map(({ execution }) => [
    ...Object.keys(execution.headers),
    ...Object.values(execution.identityHeaders ?? {}),
  ]);
  return { pins, proxyHeaders, key: JSON.stringify([[...pins], proxyHeaders]) };
}

/** The documents' catalog with the operator's pins and the proxy's headers taken out. */
function served(loaded: LoadedCatalog, shaping: Shaping): ServedCatalog {
  const proxyHeaders = new Map(loaded.apis.map((api, i) => [api.id, shaping.proxyHeaders[i] ?? []]));
  try {
    return {
      catalog: withoutProxyHeaders(pinArguments(loaded, shaping.pins), proxyHeaders),
      formats: loaded.formats,
    };
  } catch (err) {
    if (err instanceof PinError) throw new UserError(`config: operations: ${err.message}`);
    throw err;
  }
}
