// Validates Kubernetes manifests against the Kubernetes API's OpenAPI schema
// (the kubernetes-models package compiles it per kind; validate() throws on
// a missing required field, a wrong type or an unknown enum value).
//
// A kustomization.yaml is checked for naming exactly the manifests beside it.
//
// usage: node validate-manifests.mjs FILE.yaml...
// Prints one line per object; exits 1 if any object is invalid, of an
// unknown kind, or if a file does not parse.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as policy from "kubernetes-models/policy/v1";

const kinds = new Map([
  ["v1/Service", core.Service],
  ["v1/ConfigMap", core.ConfigMap],
  ["v1/Secret", core.Secret],
  ["apps/v1/StatefulSet", apps.StatefulSet],
  ["apps/v1/Deployment", apps.Deployment],
  ["policy/v1/PodDisruptionBudget", policy.PodDisruptionBudget],
]);

let failures = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      console.log(`FAIL ${file}: YAML: ${doc.errors[0].message}`);
      failures++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    if (obj.kind === "Kustomization") {
      // Not an API object: check that it names every manifest beside it,
      // and only files that exist.
      const dir = dirname(file);
      const listed = new Set(obj.resources ?? []);
      const missing = [...listed].filter((r) => !existsSync(join(dir, r)));
      const unlisted = readdirSync(dir).filter(
          (f) => /\.ya?ml$/.test(f) && f !== basename(file) && !listed.has(f));
      if (missing.length + unlisted.length > 0) {
        console.log(`FAIL ${file}: missing ${missing.join(",") || "-"}; not listed ${unlisted.join(",") || "-"}`);
        failures++;
      } else {
        console.log(`ok   ${file}: Kustomization (${listed.size} resources)`);
      }
      continue;
    }
    const what = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    const Model = kinds.get(`${obj.apiVersion}/${obj.kind}`);
    if (Model === undefined) {
      console.log(`FAIL ${what}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failures++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`ok   ${what}`);
    } catch (e) {
      console.log(`FAIL ${what}: ${e.message}`);
      failures++;
    }
  }
}
process.exit(failures === 0 ? 0 : 1);
