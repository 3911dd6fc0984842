// Module hooks (registered by refuse-packages.mjs): an import of a package named in TEST_REFUSED_PACKAGES
// (comma-separated; its subpaths too) fails as if the package were not installed.
const refused = (process.env.TEST_REFUSED_PACKAGES ?? '').split(',').filter(Boolean);

export async function resolve(specifier, context, next) {
  if (refused.some((name) => specifier === name || specifier.startsWith(`${name}/`))) {
    throw Object.assign(new Error(`refused by the test: ${specifier}`), { code: 'ERR_MODULE_NOT_FOUND' });
  }
  return next(specifier, context);
}
