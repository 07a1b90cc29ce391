// ESLint 9 flat config (`make lint`, and the first step of `make test`).
//
// src/, bench/ and examples/ get typescript-eslint's type-aware recommended rules: they
// catch what plain syntax rules cannot in a server (a promise nobody awaits or catches
// is an unhandled rejection, which crashes a shard). test/ gets the syntax-only
// recommended rules: tap's `t.test()` returns a promise that tap itself tracks, so
// no-floating-promises would flag every subtest, and the type-aware pass over the
// tests would double lint time for little.
//
// No suppressions: every violation fails `make lint` (the bulk-suppression list used
// while the engine's seams were rewritten is empty and gone).

import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bin/**', '.tap/**', 'coverage/**'] },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  js.configs.recommended,
  {
    files: ['src/**/*.ts', 'bench/**/*.ts', 'examples/**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // An `async` function that only throws or returns is how an interface that wants a
      // Promise gets a rejection instead of a synchronous throw; the rule would undo that.
      '@typescript-eslint/require-await': 'off',
      // `catch (err) { return Promise.reject(err) }` passes the caught error on unchanged.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
    },
  },
  {
    files: ['test/**/*.ts'],
    extends: [tseslint.configs.recommended],
    rules: {
      // Tests read wire JSON and SDK internals loosely on purpose; a wrong shape fails
      // the assertion that reads it.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.ts'],
    rules: {
      // `_name` marks a parameter an interface requires but this implementation ignores.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
);
