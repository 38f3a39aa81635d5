// Gives the wasm's imports from its wasm-bindgen glue short names, in the wasm and in the glue alike.
//
//   node scripts/shorten-imports.mjs pkg/NAME_bg.wasm pkg/NAME.js
//
// wasm-bindgen names each import after the JS it calls plus a hash of its signature
// (`__wbg_getAll_8f1c2e…`): about a hundred names whose hex digits gzip cannot shorten, once in the wasm's
// import section and once as a key of the glue's imports object. Here every import of the glue's module
// (`./NAME_bg.js`) becomes `a`, `b`, … `ba`, … in the order of the import section, and the glue's keys
// with it. Nothing else changes: the wasm keeps its code, the glue its functions.
//
// Called by scripts/build-js after wasm-opt. It stops with an error (and writes nothing) if the glue does
// not hold each import exactly once, as `NAME: function`: a wasm-bindgen whose glue looks otherwise needs
// this script looked at again.
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [wasmPath, gluePath] = process.argv.slice(2);
if (!wasmPath || !gluePath) {
  console.error('usage: node scripts/shorten-imports.mjs WASM GLUE_JS');
  process.exit(2);
}
const wasm = readFileSync(wasmPath);
let glue = readFileSync(gluePath, 'utf8');
const glueModule = `./${basename(wasmPath, '.wasm')}.js`;

function readU32(at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = wasm[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (byte < 0x80) return [value, at];
  }
}
function u32(value) {
  const out = [];
  do {
    let byte = value & 0x7f;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    out.push(byte);
  } while (value > 0);
  return Buffer.from(out);
}
const text = new TextDecoder('utf-8', { fatal: true });
function readName(at) {
  const [length, start] = readU32(at);
  return [text.decode(wasm.subarray(start, start + length)), start + length];
}
function name(s) {
  const bytes = Buffer.from(s, 'utf8');
  return Buffer.concat([u32(bytes.length), bytes]);
}
// The end of an import's description (after its kind byte), by kind.
function skipLimits(at) {
  const [flags, next] = readU32(at);
  at = readU32(next)[1];
  return flags & 1 ? readU32(at)[1] : at;
}
function skipDescription(kind, at) {
  switch (kind) {
    case 0: return readU32(at)[1]; // function: type index
    case 1: return skipLimits(at + 1); // table: element type, limits
    case 2: return skipLimits(at); // memory: limits
    case 3: return at + 2; // global: value type, mutability
    default: throw new Error(`${wasmPath}: import of unknown kind ${kind}`);
  }
}
// a..z, then ba, bb, …: as short as the count allows, and never a name the glue uses for something else
// (the keys live in their own object).
function shortName(i) {
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  let s = '';
  do {
    s = letters[i % 26] + s;
    i = Math.floor(i / 26);
  } while (i > 0);
  return s;
}

if (wasm.readUInt32LE(0) !== 0x6d736100) throw new Error(`${wasmPath} is not a wasm module`);
const parts = [wasm.subarray(0, 8)];
const renamed = new Map();
let at = 8;
while (at < wasm.length) {
  const id = wasm[at];
  const [size, start] = readU32(at + 1);
  const end = start + size;
  if (id !== 2) {
    parts.push(wasm.subarray(at, end));
    at = end;
    continue;
  }
  let [count, pos] = readU32(start);
  const body = [u32(count)];
  while (count-- > 0) {
    const [module, afterModule] = readName(pos);
    const [field, afterField] = readName(afterModule);
    const kind = wasm[afterField];
    const next = skipDescription(kind, afterField + 1);
    let newField = field;
    if (module === glueModule) {
      if (!renamed.has(field)) renamed.set(field, shortName(renamed.size));
      newField = renamed.get(field);
    }
    body.push(name(module), name(newField), wasm.subarray(afterField, next));
    pos = next;
  }
  if (pos !== end) throw new Error(`${wasmPath}: the import section does not end where its size says`);
  const section = Buffer.concat(body);
  parts.push(Buffer.from([2]), u32(section.length), section);
  at = end;
}
if (renamed.size === 0) throw new Error(`${wasmPath} imports nothing from ${glueModule}`);

for (const [long, short] of renamed) {
  const uses = glue.split(long).length - 1;
  const key = `${long}: function`;
  if (uses !== 1 || !glue.includes(key)) {
    throw new Error(`${gluePath}: expected ${long} once, as "${key}", found it ${uses} times`);
  }
  glue = glue.replace(key, `${short}: function`);
}
writeFileSync(wasmPath, Buffer.concat(parts));
writeFileSync(gluePath, glue);
console.log(`[shorten-imports] ${basename(wasmPath)}: ${renamed.size} imports renamed`);
