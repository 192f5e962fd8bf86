// Reads what the release-binary check needs from a Mach-O file (the macOS `.node`), in
// process, like scripts/elf.mjs does for ELF: the CPU type, the file type, the libraries it
// loads, the minimum macOS version, and the undefined symbols with the library each one is
// bound to. No otool or llvm-objdump: the check runs wherever Node does.
//
// Why the symbol table and not the dyld binding opcodes? Both the classic `LC_DYLD_INFO`
// opcodes and the newer chained fixups name the library of each import by the same ordinal
// the linker writes into the undefined symbol's `n_desc` (`GET_LIBRARY_ORDINAL`), and the
// symbol table is there in both layouts (strip keeps undefined and exported symbols). An
// import linked with `-undefined dynamic_lookup` (how napi-rs links the napi_* functions:
// Node's executable defines them) carries ordinal 0xfe, DYNAMIC_LOOKUP_ORDINAL.
//
// Only thin 64-bit little-endian files (MH_MAGIC_64): both published macOS targets are
// built one architecture a package. Every offset and count is checked against the file's
// size: a truncated or corrupt file is a MachOFormatError, never a wrong answer.
//
// Layouts: <mach-o/loader.h> (mach_header_64, load_command, dylib_command,
// build_version_command, version_min_command, symtab_command, dysymtab_command,
// segment_command_64) and <mach-o/nlist.h> (nlist_64).

/** The file is not a Mach-O file this reader understands, or its tables point outside it. */
export class MachOFormatError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MachOFormatError';
    this.code = 'MACHO_FORMAT';
  }
}

export const MH_MAGIC_64 = 0xfeedfacf;
export const FAT_MAGIC = 0xcafebabe;
export const CPU_TYPE_X86_64 = 0x01000007;
export const CPU_TYPE_ARM64 = 0x0100000c;
export const MH_DYLIB = 0x6;
export const MH_BUNDLE = 0x8;
export const LC_SEGMENT_64 = 0x19;
export const LC_SYMTAB = 0x2;
export const LC_DYSYMTAB = 0xb;
export const LC_LOAD_DYLIB = 0xc;
export const LC_ID_DYLIB = 0xd;
export const LC_LOAD_WEAK_DYLIB = 0x80000018;
export const LC_REEXPORT_DYLIB = 0x8000001f;
export const LC_LAZY_LOAD_DYLIB = 0x20;
export const LC_LOAD_UPWARD_DYLIB = 0x80000023;
export const LC_VERSION_MIN_MACOSX = 0x24;
export const LC_BUILD_VERSION = 0x32;
export const PLATFORM_MACOS = 1;
export const DYNAMIC_LOOKUP_ORDINAL = 0xfe;
export const EXECUTABLE_ORDINAL = 0xff;
const N_STAB = 0xe0;
const N_TYPE = 0x0e;
const N_EXT = 0x01;
const N_UNDF = 0x0;
const LOADS_A_DYLIB = new Set([LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB, LC_LOAD_UPWARD_DYLIB]);

export const CPU_NAMES = { [CPU_TYPE_X86_64]: 'x86_64', [CPU_TYPE_ARM64]: 'arm64' };

/** "11.0" / "10.13" / "14.2.1" from the X.Y.Z nibble encoding of a version field. */
export function decodeVersion(v) {
  const major = v >>> 16;
  const minor = (v >>> 8) & 0xff;
  const patch = v & 0xff;
  return patch ? `${major}.${minor}.${patch}` : `${major}.${minor}`;
}

/** The fields the check reads; `isMachO(bytes)` tells whether to call it. */
export function isMachO(bytes) {
  if (!(bytes instanceof Uint8Array) || bytes.length < 4) return false;
  const le = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
  const be = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, false);
  return le === MH_MAGIC_64 || be === MH_MAGIC_64 || be === FAT_MAGIC || le === 0xfeedface || be === 0xfeedface;
}

/**
 * Parses `bytes` (a Uint8Array or Buffer):
 * `{ cpuType, cpu, fileType, dylibs: [{ command, name }], minMacos, sdk, imports: [{ name, ordinal, library }],
 *    localSymbols, stabs, segments }`.
 * `imports[].library` is the dylib's path, `'dynamic lookup'` (ordinal 0xfe), `'executable'`
 * (0xff) or `'self'` (0). `localSymbols` counts non-external symbols and `stabs` debug entries:
 * both are 0 in a stripped file.
 */
export function readMachO(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readMachO: bytes must be a Uint8Array or Buffer');
  if (bytes.length < 32) throw new MachOFormatError('not a Mach-O file (shorter than a mach_header_64)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0, true);
  if (view.getUint32(0, false) === FAT_MAGIC) throw new MachOFormatError('a universal (fat) Mach-O file: only thin 64-bit files are read');
  if (magic === 0xfeedface || view.getUint32(0, false) === 0xfeedface) throw new MachOFormatError('a 32-bit Mach-O file: only MH_MAGIC_64 is read');
  if (magic !== MH_MAGIC_64) {
    if (view.getUint32(0, false) === MH_MAGIC_64) throw new MachOFormatError('a big-endian Mach-O file: only little-endian files are read');
    throw new MachOFormatError('not a Mach-O file (no MH_MAGIC_64)');
  }
  const u32 = (o) => view.getUint32(o, true);
  const cpuType = u32(4);
  const fileType = u32(12);
  const ncmds = u32(16);
  const sizeofcmds = u32(20);
  if (32 + sizeofcmds > bytes.length) throw new MachOFormatError(`the load commands (${sizeofcmds} bytes) lie past the end of the file`);
  const cString = (start, limit, what) => {
    if (start >= limit) throw new MachOFormatError(`${what}: string offset ${start} is outside its table`);
    const end = bytes.indexOf(0, start);
    if (end === -1 || end >= limit) throw new MachOFormatError(`${what}: unterminated string at ${start}`);
    return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1');
  };

  const out = { cpuType, cpu: CPU_NAMES[cpuType] ?? `0x${cpuType.toString(16)}`, fileType, dylibs: [], minMacos: null, sdk: null, imports: [], localSymbols: 0, stabs: 0, segments: [] };
  let symtab = null;
  let at = 32;
  for (let i = 0; i < ncmds; i++) {
    if (at + 8 > 32 + sizeofcmds) throw new MachOFormatError(`load command ${i} lies past the load commands' end`);
    const cmd = u32(at);
    const size = u32(at + 4);
    if (size < 8 || size % 4 !== 0 || at + size > 32 + sizeofcmds) throw new MachOFormatError(`load command ${i} (0x${cmd.toString(16)}) has a bad size ${size}`);
    const need = (n) => {
      if (size < n) throw new MachOFormatError(`load command ${i} (0x${cmd.toString(16)}) is ${size} bytes, shorter than its ${n}-byte layout`);
    };
    if (LOADS_A_DYLIB.has(cmd)) {
      need(24);
      out.dylibs.push({ command: cmd, name: cString(at + u32(at + 8), at + size, `load command ${i}`) });
    } else if (cmd === LC_BUILD_VERSION) {
      need(24);
      if (u32(at + 8) === PLATFORM_MACOS) {
        out.minMacos = decodeVersion(u32(at + 12));
        out.sdk = decodeVersion(u32(at + 16));
      }
    } else if (cmd === LC_VERSION_MIN_MACOSX) {
      need(16);
      out.minMacos = decodeVersion(u32(at + 8));
      out.sdk = decodeVersion(u32(at + 12));
    } else if (cmd === LC_SYMTAB) {
      need(24);
      symtab = { symoff: u32(at + 8), nsyms: u32(at + 12), stroff: u32(at + 16), strsize: u32(at + 20) };
    } else if (cmd === LC_SEGMENT_64) {
      need(72);
      out.segments.push(Buffer.from(bytes.buffer, bytes.byteOffset + at + 8, 16).toString('latin1').replace(/\0.*$/s, ''));
    }
    at += size;
  }

  if (symtab) {
    const { symoff, nsyms, stroff, strsize } = symtab;
    if (symoff + nsyms * 16 > bytes.length) throw new MachOFormatError(`the symbol table (${nsyms} entries at ${symoff}) lies past the end of the file`);
    if (stroff + strsize > bytes.length) throw new MachOFormatError(`the string table (${strsize} bytes at ${stroff}) lies past the end of the file`);
    for (let k = 0; k < nsyms; k++) {
      const e = symoff + k * 16;
      const type = bytes[e + 4];
      if (type & N_STAB) {
        out.stabs += 1;
        continue;
      }
      if (!(type & N_EXT)) {
        out.localSymbols += 1;
        continue;
      }
      if ((type & N_TYPE) !== N_UNDF) continue;
      const name = cString(stroff + u32(e), stroff + strsize, `symbol ${k}`);
      const ordinal = (view.getUint16(e + 6, true) >> 8) & 0xff;
      let library;
      if (ordinal === DYNAMIC_LOOKUP_ORDINAL) library = 'dynamic lookup';
      else if (ordinal === EXECUTABLE_ORDINAL) library = 'executable';
      else if (ordinal === 0) library = 'self';
      else if (ordinal <= out.dylibs.length) library = out.dylibs[ordinal - 1].name;
      else throw new MachOFormatError(`symbol ${name} names library ordinal ${ordinal}, but the file loads ${out.dylibs.length} libraries`);
      out.imports.push({ name, ordinal, library });
    }
  }
  return out;
}
