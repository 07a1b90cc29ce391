// Channel and event-name patterns of the hooks config, matched like
// channel_delta_compression's keys: an exact name, 'prefix*', '*suffix' or '*'
// (config/validate-hooks.ts checks the forms). Compiled once per app config.

export type Matcher = (name: string) => boolean;

const NONE: Matcher = () => false;
const ALL: Matcher = () => true;

export function compilePatterns(patterns: readonly string[]): Matcher {
  if (patterns.length === 0) return NONE;
  if (patterns.includes('*')) return ALL;
  const exact = new Set<string>();
  const prefixes: string[] = [];
  const suffixes: string[] = [];
  for (const p of patterns) {
    if (p.endsWith('*')) prefixes.push(p.slice(0, -1));
    else if (p.startsWith('*')) suffixes.push(p.slice(1));
    else exact.add(p);
  }
  return (name) => {
    if (exact.has(name)) return true;
    for (const p of prefixes) if (name.startsWith(p)) return true;
    for (const s of suffixes) if (name.endsWith(s)) return true;
    return false;
  };
}
