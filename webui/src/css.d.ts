// esbuild bundles imported stylesheets into the hashed CSS file; TypeScript only needs to know
// such an import exists.
declare module "*.css";
