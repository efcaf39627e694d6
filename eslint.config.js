import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.cache/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // A KeyObject that key generation returned can deadlock Node 20 when exported as a JWK.
      'no-restricted-imports': [
        'error',
        ...['node:crypto', 'crypto'].map((name) => ({
          name,
          importNames: ['generateKeyPair', 'generateKeyPairSync'],
          message: 'Use newKeyPair (src/util/key-pair.ts), whose keys export safely.',
        })),
      ],
    },
  },
  { files: ['src/util/key-pair.ts'], rules: { 'no-restricted-imports': 'off' } },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Tests read JSON response bodies whose shape the assertions themselves check.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  // Plain JavaScript, outside the TypeScript project: linted without type information.
  { files: ['eslint.config.js', 'bench/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
