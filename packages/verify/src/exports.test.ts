import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

type Target = string | { [condition: string]: Target };
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { exports: Record<string, Target> };

/** What a resolver with these conditions picks for `entry`: the first matching key, in order, as Node and bundlers do. */
function resolve(entry: string, conditions: readonly string[]): { types?: string; default?: string } {
  const pick = (target: Target, want: 'types' | 'default'): string | undefined => {
    if (typeof target === 'string') return target;
    for (const [key, value] of Object.entries(target)) {
      if (key === want || key === 'default' || conditions.includes(key)) {
        const found = pick(value, want);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  };
  const target = pkg.exports[entry]!;
  return { types: pick(target, 'types'), default: pick(target, 'default') };
}

// What TypeScript uses to find the types (moduleResolution bundler/node16, no customConditions), and what the runtimes'
// bundlers use to find the code: wrangler (Workers), Next.js/Vercel Edge, Deno, browsers, Bun, Node.
const TYPESCRIPT = ['types', 'import'];
const RUNTIMES = {
  'Cloudflare Workers (wrangler)': ['workerd', 'worker', 'browser', 'import'],
  'Vercel Edge / Next.js edge': ['edge-light', 'worker', 'browser', 'import'],
  Deno: ['deno', 'node', 'import'],
  browser: ['browser', 'import'],
  Bun: ['bun', 'node', 'import'],
  Node: ['node', 'import'],
};

describe('package exports: the code a runtime loads is the code its types describe', () => {
  // `@svc/verify` under workerd/edge-light/… was the Web Crypto build, whose verifyWebhook returns a Promise, while
  // TypeScript (which knows none of those conditions) typed it as the Node build's boolean: `if (!verifyWebhook(…))`
  // compiled and, in a Worker, accepted every forged delivery (a Promise is truthy).
  it.each(Object.entries(RUNTIMES))('@svc/verify in %s is the build TypeScript types it as (synchronous, node:crypto)', (_name, conditions) => {
    const types = resolve('.', TYPESCRIPT).types!;
    const code = resolve('.', conditions).default!;
    expect(types).toBe('./dist/index.d.ts');
    expect(code.replace(/\.js$/, '.d.ts')).toBe(types);
  });

  it.each(Object.entries(RUNTIMES))('@svc/verify/web in %s is the Web Crypto build and its types', (_name, conditions) => {
    expect(resolve('./web', conditions).default).toBe('./dist/web.js');
    expect(resolve('./web', TYPESCRIPT).types).toBe('./dist/web.d.ts');
  });
});
