// Builds with esbuild.
//   node esbuild.mjs               dist/extension.js: the extension and vscode-languageclient, one file
//   node esbuild.mjs --production  the same, minified (used by `vsce package`)
//   node esbuild.mjs --watch
//   node esbuild.mjs --tests       transpiles src/ and test/ to out/ for mocha (type checking is `tsc --noEmit`)
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');
const tests = process.argv.includes('--tests');

if (tests) {
  const files = ['src', 'test'].flatMap((dir) =>
    fs
      .readdirSync(dir, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
      .map((f) => path.join(dir, f)),
  );
  fs.rmSync('out', { recursive: true, force: true });
  await esbuild.build({
    entryPoints: files,
    outdir: 'out',
    outbase: '.',
    platform: 'node',
    target: 'node18',
    format: 'cjs',
    sourcemap: 'inline',
    logLevel: 'warning',
  });
} else {
  const options = {
    entryPoints: ['src/extension.ts'],
    bundle: true,
    outfile: 'dist/extension.js',
    platform: 'node',
    target: 'node18',
    format: 'cjs',
    external: ['vscode'],
    minify: production,
    sourcemap: production ? false : 'linked',
    sourcesContent: false,
    logLevel: 'info',
  };
  if (watch) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  } else {
    await esbuild.build(options);
  }
}
