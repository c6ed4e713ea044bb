// Stylesheets imported by the console's modules: esbuild bundles them into console.css.
declare module '*.css';
