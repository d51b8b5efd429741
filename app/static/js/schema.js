// The JobSpec schema, read from the API's own OpenAPI document: field docs, bounds and
// defaults for the spec editor, never restated here. The document is a read like any other:
// it goes with the stored token, which it needs where reads require one.

import { getToken } from './token.js';

/** @type {Promise<any> | null} the OpenAPI document, or null when it cannot be read */
let cached = null;

export async function loadSchema() {
  if (!cached) {
    const token = getToken();
    cached = fetch('/openapi.json', { headers: token ? { Authorization: `Bearer ${token}` } : {} })
      .then((r) => (r.ok ? r.json() : null))
      .catch(() => null);
  }
  const doc = await cached;
  if (!doc) cached = null; // read again next time (a token may have been entered since)
  return doc?.components?.schemas.JobSpec ? new SpecSchema(doc.components.schemas) : null;
}

export class SpecSchema {
  constructor(schemas) {
    this.schemas = schemas;
  }

  deref(node) {
    if (!node) return null;
    if (node.$ref) return this.schemas[node.$ref.split('/').pop()];
    const ref = (node.anyOf || []).find((n) => n.$ref);
    return ref ? this.schemas[ref.$ref.split('/').pop()] : node;
  }

  /** The property schema at a dotted path of a spec (list items resolve by their `name` tag). */
  field(path, spec) {
    let node = this.schemas.JobSpec;
    let value = spec;
    /** @type {any} a JSON Schema property; the document is read, not typed */
    let prop = null;
    for (const part of path) {
      const model = this.deref(node);
      if (model?.properties && part in model.properties) {
        prop = model.properties[part];
        node = prop;
      } else if (/^\d+$/.test(part) && (node.items || this.deref(node)?.items)) {
        const items = node.items || this.deref(node).items;
        const tag = value?.[Number(part)] && value[Number(part)].name;
        const mapped = items.discriminator?.mapping[tag];
        node = mapped ? { $ref: mapped } : items;
        prop = { description: mapped ? this.schemas[mapped.split('/').pop()].description : prop?.description };
      } else {
        return null;
      }
      value = value && typeof value === 'object' ? value[part] : undefined;
    }
    return prop;
  }

  defaultOf(key) {
    return this.schemas.JobSpec.properties[key]?.default;
  }
}

/** Bounds and choices of a property, for a one-line hint: "integer ≥ 1, ≤ 4096". */
export function describeType(prop) {
  const alternatives = prop.anyOf || [prop];
  return alternatives
    .map((t) => {
      if (t.type === 'null') return 'null';
      if (t.enum) return t.enum.map((e) => JSON.stringify(e)).join(' | ');
      if (t.$ref) return t.$ref.split('/').pop();
      const bounds = [
        t.minimum !== undefined ? `≥ ${t.minimum}` : null,
        t.exclusiveMinimum !== undefined ? `> ${t.exclusiveMinimum}` : null,
        t.maximum !== undefined ? `≤ ${t.maximum}` : null,
        t.exclusiveMaximum !== undefined ? `< ${t.exclusiveMaximum}` : null,
      ]
        .filter(Boolean)
        .join(', ');
      return `${t.type || 'object'}${bounds ? ` ${bounds}` : ''}`;
    })
    .join(' or ');
}
