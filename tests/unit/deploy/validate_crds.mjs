// Validate ServiceMonitor, PodMonitor and PrometheusRule documents against prometheus-operator's published CRD schemas.
// The schemas ship compiled in @kubernetes-models/prometheus-operator (installed by scripts/setup.sh).
// Usage: node validate_crds.mjs MODELS_DIR < docs.json   (a JSON array of manifests); prints one line per error.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modelsDir = process.argv[2];
const load = async (kind) =>
  (await import(pathToFileURL(join(modelsDir, "monitoring.coreos.com/v1", `${kind}.js`)).href))[kind];
const kinds = Object.fromEntries(await Promise.all(
  ["ServiceMonitor", "PodMonitor", "PrometheusRule"].map(async (k) => [k, await load(k)])));
const docs = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const doc of docs) {
  const Model = kinds[doc.kind];
  if (!Model) { console.log(`${doc.kind}: no schema`); failed++; continue; }
  try { new Model(doc).validate(); } catch (err) { console.log(`${doc.kind}/${doc.metadata?.name}: ${err.message}`); failed++; }
}
console.log(`validated ${docs.length - failed}/${docs.length}`);
process.exit(failed ? 1 : 0);
