// Builds the web UI: type-checks, refuses HTML-string rendering, bundles with esbuild into
// edge/ui/static/dist/ with content-hashed asset names, and writes the index.html that
// references them. Run from anywhere: `node webui/build.mjs`.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, "src");
const out = join(here, "..", "edge", "ui", "static", "dist");
// The UI's URL prefix: edge/ui serves `out` under it (assets under /ui/assets/).
const base = "/ui/";

// User data is rendered as DOM text only. These are the ways to turn a string into markup;
// none may appear in the sources, not even in a comment, so a grep finds nothing to review.
const FORBIDDEN = [/innerHTML/, /outerHTML/, /dangerouslySetInnerHTML/, /insertAdjacentHTML/, /document\.write/];

function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : [path];
  });
}

function refuseHtmlStrings() {
  const problems = [];
  for (const file of sources(src)) {
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, index) => {
        for (const pattern of FORBIDDEN) {
          if (pattern.test(line)) problems.push(`${relative(here, file)}:${index + 1}: ${pattern.source}`);
        }
      });
  }
  if (problems.length) {
    console.error("build refused: HTML-string rendering is not allowed (render user data as text):");
    for (const problem of problems) console.error("  " + problem);
    process.exit(1);
  }
}

function typecheck() {
  // TypeScript 7 (the native compiler), installed as "typescript-native": "typescript" is 6.0,
  // whose JavaScript API typescript-eslint needs (see README.md).
  const tsc = join(here, "node_modules", "typescript-native", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "--noEmit", "-p", join(here, "tsconfig.json")], { stdio: "inherit" });
  } catch {
    console.error("build refused: type errors");
    process.exit(1);
  }
}

function indexHtml(script, style) {
  // No inline script or style: the CSP allows only files from this origin.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Silt</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${base}${style}">
<script type="module" src="${base}${script}"></script>
</head>
<body><div id="app"></div></body>
</html>
`;
}

async function main() {
  refuseHtmlStrings();
  if (!process.argv.includes("--no-typecheck")) typecheck();
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    entryPoints: [join(src, "main.tsx")],
    bundle: true,
    format: "esm",
    target: "es2020",
    minify: true,
    sourcemap: false,
    jsx: "automatic",
    jsxImportSource: "preact",
    outdir: join(out, "assets"),
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    metafile: true,
    logLevel: "warning",
    legalComments: "none",
  });
  const outputs = Object.keys(result.metafile.outputs).map((path) => relative(out, path));
  const script = outputs.find((path) => path.endsWith(".js"));
  const style = outputs.find((path) => path.endsWith(".css"));
  if (!script || !style) throw new Error(`esbuild wrote no script or stylesheet: ${outputs.join(", ")}`);
  const html = indexHtml(script, style);
  writeFileSync(join(out, "index.html"), html);
  for (const path of outputs) console.log(`built ${path} (${statSync(join(out, path)).size} bytes)`);
}

await main();
