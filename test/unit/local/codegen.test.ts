import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { GENERATED_VALIDATORS, generateValidators } from '#local/codegen/event-validators.ts';

it('keeps the generated event-data validators in step with the schemas (run `npm run codegen` after a schema change)', () => {
  expect(readFileSync(GENERATED_VALIDATORS, 'utf8')).toBe(generateValidators());
});
