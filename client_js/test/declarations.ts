// The declarations an app's TypeScript sees (index.d.ts, ohttp.d.ts), checked against the
// code, whose JSDoc `tsc --checkJs` checks (tsconfig.json): every declared export exists
// in the code with a type the code's satisfies, and the code exports nothing undeclared.
// Type-checked by `npm run typecheck` (tests/test_client_js.py), never run.

import type * as Declared from "../index";
import type * as DeclaredOhttp from "../ohttp";
import * as Code from "../src/index.js";
import * as CodeOhttp from "../src/ohttp.js";

export const sdk: typeof Declared = Code;
export const ohttp: typeof DeclaredOhttp = CodeOhttp;

type Undeclared<C, D> = Exclude<keyof C, keyof D>;
export const everyExportDeclared: [Undeclared<typeof Code, typeof Declared>] extends [never] ? true : Undeclared<typeof Code, typeof Declared> = true;
export const everyOhttpExportDeclared: [Undeclared<typeof CodeOhttp, typeof DeclaredOhttp>] extends [never] ? true : Undeclared<typeof CodeOhttp, typeof DeclaredOhttp> = true;
