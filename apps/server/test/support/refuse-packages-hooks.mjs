// Module hooks (registered by refuse-packages.mjs): an import of a package named in TEST_REFUSED_PACKAGES
// (comma-separated; its subpaths too, but those named in TEST_ALLOWED_IMPORTS) fails as if the package were not
// installed.
const list = (value) => (value ?? '').split(',').filter(Boolean);
const refused = list(process.env.TEST_REFUSED_PACKAGES);
const allowed = new Set(list(process.env.TEST_ALLOWED_IMPORTS));

export async function resolve(specifier, context, next) {
  if (!allowed.has(specifier) && refused.some((name) => specifier === name || specifier.startsWith(`${name}/`))) {
    throw Object.assign(new Error(`refused by the test: ${specifier}`), { code: 'ERR_MODULE_NOT_FOUND' });
  }
  return next(specifier, context);
}
