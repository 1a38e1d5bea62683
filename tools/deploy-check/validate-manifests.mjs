// Validates Kubernetes manifests against the Kubernetes API's OpenAPI schema
// (the kubernetes-models package compiles it per kind; validate() throws on
// a missing required field, a wrong type or an unknown enum value).
//
// A kustomization.yaml is checked for naming exactly the manifests beside it.
// The fleet is checked for agreeing with itself: for each StatefulSet, one
// ClusterIP Service per replica selecting that pod (NAME-I by
// statefulset.kubernetes.io/pod-name), and the Envoy router's endpoints
// (a ConfigMap's envoy.yaml) exactly NAME-0 .. NAME-(replicas-1) by hostname,
// each dialling its replica's Service.
//
// usage: node validate-manifests.mjs FILE.yaml...
// Prints one line per object; exits 1 if any object is invalid, of an
// unknown kind, or if a file does not parse.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as policy from "kubernetes-models/policy/v1";
import * as networking from "kubernetes-models/networking.k8s.io/v1";

const kinds = new Map([
  ["v1/Service", core.Service],
  ["v1/ConfigMap", core.ConfigMap],
  ["v1/Secret", core.Secret],
  ["apps/v1/StatefulSet", apps.StatefulSet],
  ["apps/v1/Deployment", apps.Deployment],
  ["policy/v1/PodDisruptionBudget", policy.PodDisruptionBudget],
  ["networking.k8s.io/v1/NetworkPolicy", networking.NetworkPolicy],
]);

let failures = 0;
const objects = [];
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
    objects.push(obj);
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

// The router's endpoints: [{hostname, address, port}] of every cluster in
// every ConfigMap key named envoy.yaml.
function envoyEndpoints() {
  const out = [];
  for (const cm of objects.filter((o) => o.kind === "ConfigMap")) {
    const text = cm.data?.["envoy.yaml"];
    if (text === undefined) continue;
    const config = parse(text);
    for (const cluster of config?.static_resources?.clusters ?? []) {
      for (const group of cluster.load_assignment?.endpoints ?? []) {
        for (const e of group.lb_endpoints ?? []) {
          const socket = e.endpoint?.address?.socket_address ?? {};
          out.push({ cluster: cluster.name, hostname: e.endpoint?.hostname,
                     address: socket.address, port: socket.port_value });
        }
      }
    }
  }
  return out;
}

for (const set of objects.filter((o) => o.kind === "StatefulSet")) {
  const name = set.metadata.name;
  const replicas = set.spec?.replicas ?? 1;
  const problems = [];
  let endpoints = [];
  try {
    endpoints = envoyEndpoints().filter((e) => new RegExp(`^${name}-[0-9]+$`).test(e.hostname ?? ""));
  } catch (e) {
    problems.push(`envoy.yaml does not parse: ${e.message}`);
  }
  const services = objects.filter((o) => o.kind === "Service");
  const perReplica = services.filter((s) =>
      new RegExp(`^${name}-[0-9]+$`).test(s.spec?.selector?.["statefulset.kubernetes.io/pod-name"] ?? ""));
  for (let i = 0; i < replicas; i++) {
    const pod = `${name}-${i}`;
    const own = perReplica.filter((s) => s.spec.selector["statefulset.kubernetes.io/pod-name"] === pod);
    if (own.length !== 1) problems.push(`${own.length} Services select pod ${pod} (want 1)`);
    if (own.some((s) => s.spec.clusterIP === "None")) problems.push(`the Service of ${pod} is headless`);
    const ep = endpoints.filter((e) => e.hostname === pod);
    if (ep.length !== 1) {
      problems.push(`${ep.length} router endpoints with hostname ${pod} (want 1)`);
    } else if (own.length === 1 && ep[0].address !== own[0].metadata.name) {
      problems.push(`router endpoint ${pod} dials ${ep[0].address}, not its Service ${own[0].metadata.name}`);
    }
  }
  for (const s of perReplica) {
    const i = Number(s.spec.selector["statefulset.kubernetes.io/pod-name"].slice(name.length + 1));
    if (i >= replicas) problems.push(`Service ${s.metadata.name} selects ${name}-${i}, beyond replicas: ${replicas}`);
  }
  for (const e of endpoints) {
    if (Number(e.hostname.slice(name.length + 1)) >= replicas) {
      problems.push(`router endpoint ${e.hostname} is beyond replicas: ${replicas}`);
    }
  }
  if (problems.length > 0) {
    console.log(`FAIL fleet ${name}: ${problems.join("; ")}`);
    failures++;
  } else {
    console.log(`ok   fleet ${name}: ${replicas} replicas, a Service and a router endpoint each`);
  }
}
process.exit(failures === 0 ? 0 : 1);
