import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';

/** A relative link that leads nowhere: the file that holds it, its line, the link as written and why. */
export interface BrokenLink {
  file: string;
  line: number;
  link: string;
  problem: string;
}

/** Markdown with fenced code blocks blanked out (their lines kept, so line numbers stay right). */
function withoutFences(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const [, marker, info = ''] = /^\s*(`{3,}|~{3,})(.*)$/.exec(line) ?? [];
    // A backtick fence's info string holds no backtick: "```json, or ```yaml" in prose opens nothing.
    if (fence === undefined && marker && !(marker[0] === '`' && info.includes('`'))) {
      fence = marker;
      return '';
    }
    if (fence !== undefined) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length && info.trim() === '') fence = undefined;
      return '';
    }
    return line;
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: its headings' (a repeated one gets -1, -2, … as GitHub numbers them) and `<a id>`s. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const base = headingAnchor(heading);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
  }
  return anchors;
}

/** The relative links of a Markdown file, with their line numbers (code blocks and code spans left out). */
export function linksOf(markdown: string): { line: number; link: string }[] {
  const out: { line: number; link: string }[] = [];
  withoutFences(markdown).forEach((text, i) => {
    const line = text.replace(/(`+)[\s\S]*?\1/g, '');
    const found = [
      ...[...line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"/g)].map((m) => m[1]!),
    ];
    for (const link of found) if (!/^[a-z][a-z0-9+.-]*:/i.test(link) && !link.startsWith('//')) out.push({ line: i + 1, link });
  });
  return out;
}

/** Checks every relative link and `#anchor` in `files` (absolute paths): the file must exist, the anchor must be a heading of it. */
export function brokenLinks(files: string[], root: string): BrokenLink[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchorsIn = (file: string): Set<string> => {
    let anchors = anchorCache.get(file);
    if (!anchors) anchorCache.set(file, (anchors = anchorsOf(readFileSync(file, 'utf8'))));
    return anchors;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    for (const { line, link } of linksOf(readFileSync(file, 'utf8'))) {
      const hash = link.indexOf('#');
      const path = decodeURI(hash === -1 ? link : link.slice(0, hash));
      const anchor = hash === -1 ? undefined : decodeURIComponent(link.slice(hash + 1));
      const target = path === '' ? file : resolve(dirname(file), path.split('?')[0]!);
      const at = { file: relative(root, file), line, link };
      if (!existsSync(target)) {
        broken.push({ ...at, problem: `no such file: ${relative(root, target)}` });
      } else if (anchor && statSync(target).isFile() && target.endsWith('.md') && !anchorsIn(target).has(anchor)) {
        broken.push({ ...at, problem: `no heading #${anchor} in ${relative(root, target)}` });
      }
    }
  }
  return broken;
}
