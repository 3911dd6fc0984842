// `node --import ./refuse-packages.mjs BIN …`: the packages named in TEST_REFUSED_PACKAGES cannot be imported
// (refuse-packages-hooks.mjs). A command that still works did not load them.
import { register } from 'node:module';

register('./refuse-packages-hooks.mjs', import.meta.url);
