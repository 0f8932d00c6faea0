/**
 * CHANGELOG.md in Keep a Changelog 1.1.0 form: an `## [Unreleased]` heading first, then one
 * `## [<version>] - YYYY-MM-DD` heading per release, each version semver and each lower than the
 * one above it, the dates not going forward; the release package.json names among them; every
 * section of a version one of Keep a Changelog's six, once, and every release with at least one.
 * Its relative links reach a file and a heading. (docs/upgrading.md, which the changelog points
 * to, is a page of docs/: test/docs/docs.test.ts checks its links with every other page's.)
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, DOC_PAGES, links, page, withoutCodeBlocks } from './markdown.js';
import { ROOT } from '../infra/helpers.js';

const PATH = 'CHANGELOG.md';
const SECTIONS = ['Added', 'Changed', 'Deprecated', 'Removed', 'Fixed', 'Security'] as const;
/** semver.org's own expression for a version (2.0.0), without a leading `v`. */
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

interface Version {
  /** `Unreleased`, or the version as written. */
  label: string;
  /** The release date (YYYY-MM-DD), absent for Unreleased. */
  date?: string;
  heading: string;
  /** Its `###` headings, in order. */
  sections: string[];
}

/** Every `## ` heading of the changelog (outside code blocks) with the `### ` headings under it. */
function versions(text: string): Version[] {
  const found: Version[] = [];
  for (const line of withoutCodeBlocks(text).split('\n')) {
    if (line.startsWith('## ')) {
      const m = /^## \[([^\]]+)\](?: - (\S+))?$/.exec(line);
      found.push({ label: m?.[1] ?? line, ...(m?.[2] !== undefined ? { date: m[2] } : {}), heading: line, sections: [] });
    } else if (line.startsWith('### ')) {
      const last = found[found.length - 1];
      if (last === undefined) throw new Error(`${PATH}: "${line}" comes before any version heading`);
      last.sections.push(line.slice(4).trim());
    }
  }
  return found;
}

/** A real calendar date written YYYY-MM-DD. */
function isDate(text: string | undefined): boolean {
  if (text === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  return new Date(`${text}T00:00:00Z`).toISOString().slice(0, 10) === text;
}

/** Semver precedence (semver.org, item 11): negative when a < b, 0 when equal, positive when a > b. Build metadata is ignored. */
function compareSemver(a: string, b: string): number {
  const [ma, mb] = [SEMVER.exec(a), SEMVER.exec(b)];
  if (!ma || !mb) throw new Error(`not semver: ${ma ? b : a}`);
  for (let i = 1; i <= 3; i += 1) {
    const diff = Number(ma[i]) - Number(mb[i]);
    if (diff !== 0) return diff;
  }
  const [pa, pb] = [ma[4], mb[4]];
  if (pa === undefined || pb === undefined) return pa === pb ? 0 : pa === undefined ? 1 : -1;
  const [ia, ib] = [pa.split('.'), pb.split('.')];
  for (let i = 0; i < Math.min(ia.length, ib.length); i += 1) {
    const [x, y] = [ia[i]!, ib[i]!];
    if (x === y) continue;
    const [nx, ny] = [/^\d+$/.test(x), /^\d+$/.test(y)];
    if (nx && ny) return Number(x) - Number(y);
    if (nx !== ny) return nx ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return ia.length - ib.length;
}

const text = page(PATH);
const all = versions(text);
const releases = all.filter((v) => v.label !== 'Unreleased');
const packageVersion = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('CHANGELOG.md', () => {
  it('opens with `## [Unreleased]`, once, and has a dated heading for the version package.json names', () => {
    expect(all.length).toBeGreaterThan(1);
    expect(all[0]!.heading).toBe('## [Unreleased]');
    expect(all.filter((v) => v.label === 'Unreleased')).toHaveLength(1);
    const current = releases.find((v) => v.label === packageVersion);
    expect(current, `${PATH} has no heading for package.json's version ${packageVersion}`).toBeDefined();
    expect(current!.heading).toMatch(/^## \[[^\]]+\] - \d{4}-\d{2}-\d{2}$/);
  });

  it('heads every release `## [<semver>] - YYYY-MM-DD`, versions descending, dates never going forward', () => {
    for (const v of releases) {
      expect(v.label, `${PATH}: ${v.heading}`).toMatch(SEMVER);
      expect(isDate(v.date), `${PATH}: ${v.heading} has no YYYY-MM-DD date`).toBe(true);
    }
    for (let i = 1; i < releases.length; i += 1) {
      const [above, below] = [releases[i - 1]!, releases[i]!];
      expect(compareSemver(above.label, below.label), `${PATH}: ${above.label} above ${below.label}`).toBeGreaterThan(0);
      expect(above.date! >= below.date!, `${PATH}: ${above.label} (${above.date}) is dated before ${below.label} (${below.date})`).toBe(true);
    }
  });

  it("gives each version only Keep a Changelog's sections, each once, and each release at least one", () => {
    for (const v of all) {
      expect(v.sections.filter((s) => !(SECTIONS as readonly string[]).includes(s)), `${PATH}: ${v.heading}`).toEqual([]);
      expect(new Set(v.sections).size, `${PATH}: ${v.heading} repeats a section`).toBe(v.sections.length);
    }
    for (const v of releases) expect(v.sections.length, `${PATH}: ${v.heading} has no section`).toBeGreaterThan(0);
  });

  it('defines a link reference only for a version it heads, and then one for each', () => {
    const defined = [...text.matchAll(/^\[([^\]]+)\]: \S+$/gm)].map((m) => m[1]!);
    const labels = all.map((v) => v.label);
    expect(defined.filter((label) => !labels.includes(label))).toEqual([]);
    if (defined.length > 0) expect([...defined].sort()).toEqual([...labels].sort());
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const { target, line } of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? PATH : normalize(join(dirname(PATH), decodeURIComponent(file)));
      if (!existsSync(join(ROOT, resolved))) broken.push(`${PATH}:${line}: ${target} (no file ${resolved})`);
      else if (anchor !== undefined && (!resolved.endsWith('.md') || !anchors(page(resolved)).has(anchor))) broken.push(`${PATH}:${line}: ${target} (no heading #${anchor})`);
    }
    expect(broken).toEqual([]);
    expect(links(text).map((l) => l.target)).toContain('docs/upgrading.md');
    expect(DOC_PAGES, "docs/upgrading.md's links are checked with every page of docs/").toContain('docs/upgrading.md');
  });
});

describe('compareSemver', () => {
  it('orders versions as semver.org does', () => {
    const ordered = ['0.1.0', '0.1.1', '0.2.0', '1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-alpha.beta', '1.0.0-beta', '1.0.0-beta.2', '1.0.0-beta.11', '1.0.0-rc.1', '1.0.0', '1.10.0'];
    for (let i = 1; i < ordered.length; i += 1) {
      expect(compareSemver(ordered[i]!, ordered[i - 1]!), `${ordered[i]} > ${ordered[i - 1]}`).toBeGreaterThan(0);
      expect(compareSemver(ordered[i - 1]!, ordered[i]!)).toBeLessThan(0);
    }
    expect(compareSemver('1.0.0+build.1', '1.0.0')).toBe(0);
  });
});
