// The JavaScript style check (lint tier, scripts/test.d/15-js-lint): ESLint's recommended correctness
// rules plus a small set of layout rules that match how the code is written. Semicolons differ by tree
// (none in js/ and tests/js, always elsewhere): see docs/decisions.md, "One JavaScript style".
import js from '@eslint/js'
import globals from 'globals'
import stylistic from '@stylistic/eslint-plugin'

const NO_SEMICOLONS = ['js/**', 'tests/js/**', 'eslint.config.js']

export default [
  {
    ignores: [
      'js/dist/**', 'js/pkg/**', 'www/vendor/**', 'pkg/**', 'target/**', 'worker/build/**', 'worker/target/**',
      'test-artifacts/**', '.wrangler/**', '.venv/**', '.queen-edge/**', 'node_modules/**',
      // The release builds' staging folders (scripts/build-worker, scripts/build-js), which exist while a build runs
      // beside this tier in scripts/test.
      'worker/build.tmp/**', 'js/.dist-*/**',
      // worker-build's entry shim (upstream's but for its default export and the Durable Object classes); a template ($HANDLERS), not a module yet.
      'worker/shim.js'
    ]
  },
  js.configs.recommended,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      ecmaVersion: 2025,
      sourceType: 'module',
      globals: { ...globals.node, ...globals.browser, ...globals.worker }
    },
    plugins: { '@stylistic': stylistic },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      // `let x = []` before a try that assigns it is the house idiom, not a bug.
      'no-useless-assignment': 'off',
      'no-var': 'error',
      'prefer-const': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      '@stylistic/indent': ['error', 2, { SwitchCase: 1, CallExpression: { arguments: 'off' }, ArrayExpression: 'off' }],
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
      '@stylistic/semi': ['error', 'always'],
      '@stylistic/comma-dangle': ['error', 'only-multiline'],
      '@stylistic/no-trailing-spaces': 'error',
      '@stylistic/eol-last': 'error',
      '@stylistic/no-tabs': 'error',
      '@stylistic/no-multiple-empty-lines': ['error', { max: 1 }],
      '@stylistic/no-multi-spaces': ['error', { ignoreEOLComments: true }],
      '@stylistic/keyword-spacing': 'error',
      '@stylistic/space-infix-ops': 'error',
      '@stylistic/space-before-blocks': 'error',
      '@stylistic/comma-spacing': 'error',
      '@stylistic/key-spacing': 'error',
      '@stylistic/arrow-parens': ['error', 'always'],
      '@stylistic/brace-style': ['error', '1tbs', { allowSingleLine: true }],
      '@stylistic/space-before-function-paren': ['error', { anonymous: 'always', named: 'never', asyncArrow: 'always' }],
      '@stylistic/spaced-comment': 'error',
      '@stylistic/padded-blocks': ['error', 'never'],
      '@stylistic/max-len': ['error', {
        code: 160, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true
      }]
    }
  },
  {
    files: NO_SEMICOLONS,
    rules: {
      '@stylistic/semi': ['error', 'never'],
      '@stylistic/comma-dangle': ['error', 'never']
    }
  }
]
