/**
 * `npm run conformance -- <vectors.json>`: runs conformance vectors, prints one line per failing
 * case and ends with `conformance: N passed, M failed, K skipped`. Exits 1 on failures, 2 when the
 * file cannot be read or parsed.
 */
import { readFileSync } from 'node:fs';
import { runVectors, summarize } from './conformance/run-vectors.ts';

const file = process.argv[2];
if (!file) {
  console.error('usage: npm run conformance -- <vectors.json>');
  process.exit(2);
}
let vectors: unknown;
try {
  vectors = JSON.parse(readFileSync(file, 'utf8'));
} catch (error) {
  console.error(`conformance: cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(2);
}
if (!Array.isArray(vectors)) {
  console.error(`conformance: ${file} is not a JSON array of cases`);
  process.exit(2);
}
const results = runVectors(vectors);
for (const r of results) if (r.status === 'failed') console.log(`FAIL ${r.name}: ${r.difference}`);
const { passed, failed, skipped } = summarize(results);
console.log(`conformance: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 ? 1 : 0);
