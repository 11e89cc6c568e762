import { describe, expect, it } from 'vitest';

/**
 * Tests run the TypeScript sources of every workspace package, common included: an edit to
 * services/common/src is what the next `npx vitest run <file>` tests, with no build between.
 */
describe('the @animal-store/source export condition', () => {
  it.each(['@animal-store/common/errors.js', '@animal-store/gateway/app.js', '@animal-store/pets/app.js'])(
    'resolves %s to its source under vitest',
    async (specifier) => {
      const mod = await import(specifier);
      expect(Object.keys(mod).length).toBeGreaterThan(0);
      expect(import.meta.resolve(specifier)).toMatch(/\/src\/[\w-]+\.ts$/);
    },
  );
});
