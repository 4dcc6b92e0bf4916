// Builds the web UI into ../internal/web/dist, which internal/web embeds:
// one JavaScript and one CSS bundle with content-hashed names (served with
// long cache headers), index.html naming them (served no-cache), and a
// gzip copy of each text file (served with Content-Encoding: gzip to
// browsers that accept it). No inline script or style: the page's CSP is
// default-src 'self'.
import * as esbuild from "esbuild";
import { gzipSync } from "node:zlib";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const out = new URL("../internal/web/dist/", import.meta.url).pathname;
const assets = join(out, "assets");

// Clear what an earlier build left, keeping the committed README (the
// placeholder that lets `go build` and `go vet` work before any npm build).
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) {
  if (f !== "README") rmSync(join(out, f), { recursive: true, force: true });
}

const result = await esbuild.build({
  entryPoints: ["src/main.tsx"],
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022"],
  outdir: assets,
  entryNames: "[name]-[hash]",
  // The terminal view's xterm.js is a chunk of its own, loaded when that
  // view opens: the first load does not carry it.
  splitting: true,
  chunkNames: "[name]-[hash]",
  jsx: "automatic",
  jsxImportSource: "preact",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});

let js = "", css = "";
const files = [];
for (const [f, o] of Object.entries(result.metafile.outputs)) {
  if (f.endsWith(".js") || f.endsWith(".css")) files.push(basename(f));
  if (f.endsWith(".js") && o.entryPoint === "src/main.tsx") js = basename(f);
  if (f.endsWith(".css")) css = basename(f);
}
if (!js || !css) throw new Error("build: esbuild made no JS or no CSS bundle");

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>troupe</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script>
</head>
<body>
<div id="app"></div>
</body>
</html>
`;
writeFileSync(join(out, "index.html"), html);

// Precompressed copies of every text file.
for (const f of [join(out, "index.html"), ...files.map((n) => join(assets, n))]) {
  writeFileSync(f + ".gz", gzipSync(readFileSync(f), { level: 9 }));
}
const size = (f) => readFileSync(join(assets, f)).length;
const chunks = files.filter((n) => n !== js && n !== css).map((n) => `${n} (${size(n)} B, gzip ${size(n + ".gz")} B)`);
console.log(`web: built ${js} (${size(js)} B, gzip ${size(js + ".gz")} B), ${css} (${size(css)} B, gzip ${size(css + ".gz")} B)` +
  (chunks.length ? `; loaded on demand: ${chunks.join(", ")}` : ""));
