// Reads what the release-binary check needs from a PE file (the Windows `.node`, a DLL), in
// process, like scripts/elf.mjs and scripts/macho.mjs: the machine, whether it is a DLL,
// and the DLLs it imports from (the import table and the delay-load import table), each with
// the functions it takes. No dumpbin or llvm-readobj: the check runs wherever Node does.
//
// Only PE32+ (64-bit) images: the one Windows target published is x86_64. Every RVA, offset
// and count is checked against the file: a truncated or corrupt file is a PeFormatError,
// never a wrong answer.
//
// Layouts: the PE/COFF specification's IMAGE_DOS_HEADER (e_lfanew at 0x3c), the COFF file
// header, IMAGE_OPTIONAL_HEADER64 (data directories from offset 112), IMAGE_SECTION_HEADER,
// IMAGE_IMPORT_DESCRIPTOR, IMAGE_DELAYLOAD_DESCRIPTOR and the 64-bit import lookup entries.

/** The file is not a PE file this reader understands, or its tables point outside it. */
export class PeFormatError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PeFormatError';
    this.code = 'PE_FORMAT';
  }
}

export const IMAGE_FILE_MACHINE_AMD64 = 0x8664;
export const IMAGE_FILE_MACHINE_ARM64 = 0xaa64;
export const IMAGE_FILE_MACHINE_I386 = 0x14c;
export const IMAGE_FILE_DLL = 0x2000;
const PE32_PLUS = 0x20b;
const IMPORT_DIRECTORY = 1;
const DELAY_IMPORT_DIRECTORY = 13;
export const MACHINE_NAMES = { [IMAGE_FILE_MACHINE_AMD64]: 'x86_64', [IMAGE_FILE_MACHINE_ARM64]: 'arm64', [IMAGE_FILE_MACHINE_I386]: 'i386' };

/** Whether `bytes` starts like a PE image (MZ), so that readPe is the reader to call. */
export function isPe(bytes) {
  return bytes instanceof Uint8Array && bytes.length >= 2 && bytes[0] === 0x4d && bytes[1] === 0x5a;
}

/**
 * Parses `bytes` (a Uint8Array or Buffer):
 * `{ machine, cpu, dll, imports: [{ dll, delayed, functions: [...] }] }`, imports in table
 * order; a function imported by ordinal reads `#<n>`.
 */
export function readPe(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readPe: bytes must be a Uint8Array or Buffer');
  if (!isPe(bytes) || bytes.length < 64) throw new PeFormatError('not a PE file (no MZ header)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (o) => view.getUint16(o, true);
  const u32 = (o) => view.getUint32(o, true);
  const within = (o, n, what) => {
    if (o + n > bytes.length) throw new PeFormatError(`${what} at ${o} lies past the end of the file`);
  };
  const pe = u32(0x3c);
  within(pe, 24, 'the PE header');
  if (u32(pe) !== 0x00004550) throw new PeFormatError('no PE\\0\\0 signature at e_lfanew: an MS-DOS executable, not a PE image');
  const machine = u16(pe + 4);
  const nsections = u16(pe + 6);
  const optSize = u16(pe + 20);
  const characteristics = u16(pe + 22);
  const opt = pe + 24;
  within(opt, optSize, 'the optional header');
  if (optSize < 112 || u16(opt) !== PE32_PLUS) throw new PeFormatError(`not a PE32+ image (optional header magic 0x${optSize >= 2 ? u16(opt).toString(16) : '?'}): only 64-bit images are read`);
  const ndirs = u32(opt + 108);
  if (112 + 8 * Math.min(ndirs, 16) > optSize) throw new PeFormatError(`${ndirs} data directories do not fit the ${optSize}-byte optional header`);
  const directory = (i) => (i < ndirs ? { rva: u32(opt + 112 + 8 * i), size: u32(opt + 116 + 8 * i) } : { rva: 0, size: 0 });

  const sectionsAt = opt + optSize;
  within(sectionsAt, 40 * nsections, `the section table (${nsections} entries)`);
  const sections = Array.from({ length: nsections }, (_, i) => {
    const h = sectionsAt + 40 * i;
    return { va: u32(h + 12), vsize: u32(h + 8), rawSize: u32(h + 16), raw: u32(h + 20) };
  });
  const offsetOf = (rva, what) => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + Math.max(x.vsize, x.rawSize));
    if (!s) throw new PeFormatError(`${what} (RVA 0x${rva.toString(16)}) is in no section`);
    const o = rva - s.va + s.raw;
    if (rva - s.va >= s.rawSize || o >= bytes.length) throw new PeFormatError(`${what} (RVA 0x${rva.toString(16)}) lies past its section's data`);
    return o;
  };
  const cString = (rva, what) => {
    const start = offsetOf(rva, what);
    const end = bytes.indexOf(0, start);
    if (end === -1) throw new PeFormatError(`${what}: unterminated string at ${start}`);
    return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1');
  };
  // An import lookup table: 64-bit entries up to a zero one; at most as many as the file holds.
  const functions = (rva, dll) => {
    const names = [];
    let o = offsetOf(rva, `${dll}'s import lookup table`);
    for (;;) {
      within(o, 8, `an import lookup entry of ${dll}`);
      const entry = view.getBigUint64(o, true);
      if (entry === 0n) break;
      if (entry & (1n << 63n)) names.push(`#${Number(entry & 0xffffn)}`);
      else names.push(cString(Number(entry & 0x7fffffffn) + 2, `an imported name of ${dll}`));
      o += 8;
    }
    return names;
  };

  const imports = [];
  const readDescriptors = ({ rva, size }, entry, delayed) => {
    if (rva === 0 || size === 0) return;
    let o = offsetOf(rva, delayed ? 'the delay-load import table' : 'the import table');
    for (let n = 0; n < Math.floor(bytes.length / entry); n++, o += entry) {
      within(o, entry, delayed ? 'a delay-load descriptor' : 'an import descriptor');
      const [nameRva, lookupRva] = delayed ? [u32(o + 4), u32(o + 16)] : [u32(o + 12), u32(o) || u32(o + 16)];
      if (nameRva === 0 && lookupRva === 0) return;
      const dll = cString(nameRva, 'an imported DLL name');
      imports.push({ dll, delayed, functions: lookupRva ? functions(lookupRva, dll) : [] });
    }
  };
  readDescriptors(directory(IMPORT_DIRECTORY), 20, false);
  readDescriptors(directory(DELAY_IMPORT_DIRECTORY), 32, true);
  return { machine, cpu: MACHINE_NAMES[machine] ?? `0x${machine.toString(16)}`, dll: (characteristics & IMAGE_FILE_DLL) !== 0, imports };
}
