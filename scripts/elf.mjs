// Reads what the release-binary check needs from an ELF file, in process: the section table
// and the dynamic symbols' version needs (.gnu.version_r and .gnu.version). Why not objdump
// and readelf? They are binutils, a system package: reading the file ourselves keeps
// `.ci/run` free of system packages, and the check runs wherever Node does.
//
// Only 64-bit ELF (either byte order): every Linux target the package publishes is 64-bit.
// Every offset and count read from the file is checked against its size: a truncated or
// corrupt file is an ElfFormatError, never a wrong answer or a RangeError.
//
// The layouts are the System V ABI's (Elf64_Ehdr, Elf64_Shdr, Elf64_Sym) and the GNU symbol
// versioning extension's (Elf64_Verneed, Elf64_Vernaux, one Elf64_Half per dynamic symbol).

/** The file is not an ELF file this reader understands, or its tables point outside it. */
export class ElfFormatError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ElfFormatError';
    this.code = 'ELF_FORMAT';
  }
}

export const SHT_SYMTAB = 2;
export const SHT_STRTAB = 3;
export const SHT_NOBITS = 8;
export const SHT_DYNSYM = 11;
export const SHT_DYNAMIC = 6;
export const EM_X86_64 = 62;
export const EM_AARCH64 = 183;
export const MACHINE_NAMES = { [EM_X86_64]: 'x86_64', [EM_AARCH64]: 'aarch64' };
const DT_NEEDED = 1;
export const SHT_GNU_VERNEED = 0x6ffffffe;
export const SHT_GNU_VERSYM = 0x6fffffff;
const SHN_XINDEX = 0xffff;
const VER_FLG_WEAK = 0x2;

/**
 * Parses the ELF header and section table of `bytes` (a Uint8Array or Buffer).
 * Returns `{ littleEndian, machine, sections: [{ index, name, type, offset, size, link, info, entsize }], view }`
 * (`machine` is e_machine: EM_X86_64, EM_AARCH64, …).
 */
export function readElf(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readElf: bytes must be a Uint8Array or Buffer');
  if (bytes.length < 64 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) {
    throw new ElfFormatError('not an ELF file (no \\x7fELF magic)');
  }
  if (bytes[4] !== 2) throw new ElfFormatError(`not a 64-bit ELF file (EI_CLASS ${bytes[4]}): only ELFCLASS64 is read`);
  if (bytes[5] !== 1 && bytes[5] !== 2) throw new ElfFormatError(`unknown byte order (EI_DATA ${bytes[5]})`);
  const le = bytes[5] === 1;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (o) => view.getUint16(o, le);
  const u32 = (o) => view.getUint32(o, le);
  const u64 = (o) => {
    const v = view.getBigUint64(o, le);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ElfFormatError(`a 64-bit field at ${o} is out of range`);
    return Number(v);
  };
  const machine = u16(0x12);
  const shoff = u64(0x28);
  const shentsize = u16(0x3a);
  let shnum = u16(0x3c);
  let shstrndx = u16(0x3e);
  if (shoff === 0) return { littleEndian: le, machine, sections: [], view };
  if (shentsize < 64) throw new ElfFormatError(`section header size ${shentsize} is smaller than Elf64_Shdr`);
  const header = (i) => {
    const at = shoff + i * shentsize;
    if (at + 64 > bytes.length) throw new ElfFormatError(`section header ${i} lies past the end of the file`);
    return {
      index: i,
      nameOffset: u32(at),
      type: u32(at + 4),
      offset: u64(at + 24),
      size: u64(at + 32),
      link: u32(at + 40),
      info: u32(at + 44),
      entsize: u64(at + 56),
    };
  };
  // Extended numbering: with 0xff00 or more sections, the counts live in section 0.
  const first = header(0);
  if (shnum === 0) shnum = first.size;
  if (shstrndx === SHN_XINDEX) shstrndx = first.link;
  if (shoff + shnum * shentsize > bytes.length) throw new ElfFormatError(`the section table (${shnum} entries) lies past the end of the file`);
  const raw = Array.from({ length: shnum }, (_, i) => header(i));
  for (const s of raw) {
    if (s.type !== SHT_NOBITS && s.offset + s.size > bytes.length) {
      throw new ElfFormatError(`section ${s.index} (offset ${s.offset}, ${s.size} bytes) lies past the end of the file`);
    }
  }
  const names = shstrndx < raw.length ? raw[shstrndx] : null;
  const sections = raw.map(({ nameOffset, ...s }) => ({ ...s, name: names ? cString(bytes, names, nameOffset) : '' }));
  return { littleEndian: le, machine, sections, view };
}

/** The NUL-terminated string at `offset` in string table section `table`. */
function cString(bytes, table, offset) {
  if (offset >= table.size) throw new ElfFormatError(`string offset ${offset} is outside section ${table.index}`);
  const start = table.offset + offset;
  const end = bytes.indexOf(0, start);
  if (end === -1 || end >= table.offset + table.size) throw new ElfFormatError(`unterminated string in section ${table.index}`);
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1');
}

function linked(elf, section, what) {
  const target = elf.sections[section.link];
  if (!target) throw new ElfFormatError(`section ${section.index} (${what}) links to missing section ${section.link}`);
  return target;
}

/**
 * The versions the file needs from the shared libraries it links (its .gnu.version_r), each
 * with the dynamic symbols bound to it (from .gnu.version and .dynsym), in symbol-table order:
 * `[{ file: 'libc.so.6', version: 'GLIBC_2.34', weak: false, symbols: ['pthread_create', …] }]`.
 * The dynamic loader refuses to load a file one of whose needed versions (not weak) is missing.
 */
export function versionNeeds(bytes, elf = readElf(bytes)) {
  const { view, littleEndian: le } = elf;
  const u16 = (o) => view.getUint16(o, le);
  const u32 = (o) => view.getUint32(o, le);
  const inside = (section, at, size, what) => {
    if (at < section.offset || at + size > section.offset + section.size) {
      throw new ElfFormatError(`${what} at ${at} lies outside section ${section.index}`);
    }
  };
  /** @type {Map<number, { file: string, version: string, weak: boolean, symbols: string[] }>} */
  const byIndex = new Map();
  const needs = [];
  for (const section of elf.sections.filter((s) => s.type === SHT_GNU_VERNEED)) {
    const strings = linked(elf, section, '.gnu.version_r');
    let at = section.offset;
    // sh_info is the entry count; the chain ends early at vn_next 0, and never runs longer
    // than the section could hold (a cycle in a corrupt file).
    for (let n = 0; n < section.info && n < section.size / 16; n++) {
      inside(section, at, 16, 'a Verneed entry');
      const count = u16(at + 2);
      const file = cString(bytes, strings, u32(at + 4));
      let aux = at + u32(at + 8);
      for (let k = 0; k < count && k < section.size / 16; k++) {
        inside(section, aux, 16, 'a Vernaux entry');
        const need = { file, version: cString(bytes, strings, u32(aux + 8)), weak: (u16(aux + 4) & VER_FLG_WEAK) !== 0, symbols: [] };
        needs.push(need);
        byIndex.set(u16(aux + 6), need);
        const next = u32(aux + 12);
        if (next === 0) break;
        aux += next;
      }
      const next = u32(at + 12);
      if (next === 0) break;
      at += next;
    }
  }
  const versym = elf.sections.find((s) => s.type === SHT_GNU_VERSYM);
  if (versym && needs.length > 0) {
    const dynsym = linked(elf, versym, '.gnu.version');
    if (dynsym.type !== SHT_DYNSYM) throw new ElfFormatError(`.gnu.version links to section ${dynsym.index}, not a dynamic symbol table`);
    const strings = linked(elf, dynsym, '.dynsym');
    const entsize = dynsym.entsize || 24;
    if (entsize < 24) throw new ElfFormatError(`dynamic symbol size ${entsize} is smaller than Elf64_Sym`);
    const count = Math.min(versym.size / 2, dynsym.size / entsize);
    for (let i = 1; i < count; i++) {
      const need = byIndex.get(u16(versym.offset + 2 * i) & 0x7fff);
      if (need) need.symbols.push(cString(bytes, strings, u32(dynsym.offset + i * entsize)));
    }
  }
  return needs;
}

/** Whether the file has a static symbol table (SHT_SYMTAB, `.symtab`): `strip` removes it. */
export function hasSymtab(bytes, elf = readElf(bytes)) {
  return elf.sections.some((s) => s.type === SHT_SYMTAB);
}

/**
 * The shared libraries the file names in its dynamic section (DT_NEEDED), in order:
 * `['libc.so.6', 'libm.so.6', …]`. A musl build names `libc.so` (musl's one library) and no
 * glibc file.
 */
export function neededLibraries(bytes, elf = readElf(bytes)) {
  const { view, littleEndian: le } = elf;
  const names = [];
  for (const section of elf.sections.filter((s) => s.type === SHT_DYNAMIC)) {
    const strings = linked(elf, section, '.dynamic');
    for (let at = section.offset; at + 16 <= section.offset + section.size; at += 16) {
      const tag = view.getBigInt64(at, le);
      if (tag === 0n) break; // DT_NULL
      if (tag === BigInt(DT_NEEDED)) {
        const value = view.getBigUint64(at + 8, le);
        if (value > 0xffffffffn) throw new ElfFormatError(`a DT_NEEDED entry at ${at} has an out-of-range name offset`);
        names.push(cString(bytes, strings, Number(value)));
      }
    }
  }
  return names;
}
