// Offline check of keel's Kubernetes manifests against the API schemas (no cluster needed):
//  1. each document is validated by kubernetes-models' schema validators (generated from the Kubernetes
//     1.27 OpenAPI document, and from the Prometheus Operator CRDs): required fields, types, formats;
//  2. each document is type-checked by the TypeScript compiler as an object literal of the same API
//     type, which rejects what (1) lets through: unknown fields at any depth (a misspelt key would be
//     dropped by the API server with only a warning).
// Usage: node validate.mjs DIR   (every *.yaml in DIR but kustomization.yaml, whose resources must
// all exist). Prints one line per document; exits 1 on any error, naming the file and field.
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const core = (group, kind) => ({ module: `kubernetes-models/${group}/${kind}`, type: `I${kind}` });
const monitoring = (kind) => ({
  module: `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`,
  type: `I${kind}`,
});
const KINDS = {
  "v1/Namespace": core("v1", "Namespace"),
  "v1/ServiceAccount": core("v1", "ServiceAccount"),
  "v1/ConfigMap": core("v1", "ConfigMap"),
  "v1/Service": core("v1", "Service"),
  "apps/v1/DaemonSet": core("apps/v1", "DaemonSet"),
  "monitoring.coreos.com/v1/ServiceMonitor": monitoring("ServiceMonitor"),
  "monitoring.coreos.com/v1/PrometheusRule": monitoring("PrometheusRule"),
};

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node validate.mjs DIR");
  process.exit(2);
}
let failed = 0;
const fail = (where, what) => {
  console.log(`error: ${where}: ${what}`);
  failed++;
};

const docs = [];
for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  const text = readFileSync(join(dir, file), "utf8");
  if (file === "kustomization.yaml") {
    const k = parseAllDocuments(text)[0].toJS();
    for (const r of k.resources ?? []) if (!existsSync(join(dir, r))) fail(file, `resource ${r} does not exist`);
    continue;
  }
  parseAllDocuments(text).forEach((d, i) => {
    const where = `${file}#${i}`;
    if (d.errors.length) return fail(where, `YAML: ${d.errors.map((e) => e.message).join("; ")}`);
    const obj = d.toJS();
    const key = `${obj?.apiVersion}/${obj?.kind}`;
    if (!KINDS[key]) return fail(where, `no schema here for apiVersion ${obj?.apiVersion} kind ${obj?.kind}`);
    docs.push({ where, key, obj });
  });
}

// 1. The schema validators.
for (const d of docs) {
  const mod = await import(KINDS[d.key].module);
  const Model = mod[d.obj.kind];
  try {
    new Model(d.obj).validate();
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message ?? x.keyword}`);
    fail(d.where, `${d.key} ${d.obj.metadata?.name}: ${details.join("; ") || e.message}`);
  }
}

// 2. The compiler: every document as a literal of its API type, in one program.
const tmp = mkdtempSync(join(tmpdir(), "keel-k8s-"));
try {
  const lines = [];
  docs.forEach((d, i) => {
    const { module, type } = KINDS[d.key];
    lines.push(`import type { ${type} as T${i} } from "${module}";`);
  });
  const where = [];
  docs.forEach((d, i) => {
    where.push({ line: lines.length, doc: d });
    lines.push(`export const doc${i}: T${i} = ${JSON.stringify(d.obj)};`);
  });
  const file = join(tmp, "manifests.ts");
  writeFileSync(file, lines.join("\n") + "\n");
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    typeRoots: [],
    baseUrl: here,
    paths: { "*": [join(here, "node_modules", "*")] },
  });
  for (const diag of ts.getPreEmitDiagnostics(program)) {
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, " ");
    let at = "compiler";
    if (diag.file && diag.start !== undefined) {
      const { line } = diag.file.getLineAndCharacterOfPosition(diag.start);
      const w = where.find((x) => x.line === line);
      // The object literal's text up to the error names the field: show what is around it.
      if (w) {
        const text = diag.file.text;
        at = `${w.doc.where} (${w.doc.key} ${w.doc.obj.metadata?.name}) near ${text.slice(diag.start, diag.start + 60)}`;
      }
    }
    fail(at, msg);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

for (const d of docs) console.log(`${failed ? "checked" : "ok"}: ${d.where} ${d.key} ${d.obj.metadata?.name}`);
console.log(failed ? `${failed} error(s)` : `all ${docs.length} documents valid`);
process.exit(failed ? 1 : 0);
