/**
 * The parts of a Markdown page the link checks need: its headings' anchors as GitHub makes them (`github-slugger`,
 * GitHub's own algorithm, on the heading's text as rendered) and its links. Fenced code blocks are not Markdown.
 */
import GithubSlugger from 'github-slugger';

/** The page's lines outside fenced code blocks, with their 1-based line numbers. */
function proseLines(text: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, i) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (m) {
      const marker = (m[1] as string)[0] as string;
      if (fence === undefined) fence = marker;
      else if (fence === marker) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, n: i + 1 });
  });
  return out;
}

/** A heading's text as GitHub renders it: links as their text, code spans as their code, no emphasis markers. */
function renderedText(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(\*\*|__|\*)/g, '')
    .replace(/<[^>]+>/g, '')
    .trim();
}

/** Every anchor GitHub gives the page's headings (a repeated heading gets `-1`, `-2`...). */
export function headingAnchors(text: string): string[] {
  const slugger = new GithubSlugger();
  return proseLines(text)
    .map(({ line }) => /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => slugger.slug(renderedText(m[1] as string)));
}

export interface MarkdownLink {
  readonly target: string;
  readonly line: number;
}

/** Every inline link and image of the page (outside code blocks and code spans). */
export function markdownLinks(text: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  for (const { line, n } of proseLines(text)) {
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) links.push({ target: m[1] as string, line: n });
  }
  return links;
}

/** True for a link to another site or scheme (`https:`, `mailto:`), which the checks do not follow. */
export function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target);
}
