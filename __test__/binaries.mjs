// Small, exact binaries for the release-binary check's tests (release.test.mjs,
// binary-formats.test.mjs): each writer lays out only the structures the readers in
// scripts/elf.mjs, scripts/macho.mjs and scripts/pe.mjs look at, so every case states
// exactly what the file holds.

// A minimal ELF64 shared object, written here so each case is exact: `needs` is what its
// .gnu.version_r asks of each library, `symbols` the dynamic symbols and the version each is
// bound to (null: unversioned), `symtab` whether it keeps a static symbol table (unstripped),
// `machine` its e_machine (62 x86_64, 183 aarch64), `needed` the DT_NEEDED libraries of its
// .dynamic section (none: no .dynamic section).
export function elf({ needs = [], symbols = [], symtab = false, bigEndian = false, machine = 62, needed = [] } = {}) {
  const le = !bigEndian;
  const strtab = () => {
    const parts = ['\0'];
    let size = 1;
    const at = new Map();
    return {
      add(str) {
        if (!at.has(str)) {
          at.set(str, size);
          parts.push(`${str}\0`);
          size += Buffer.byteLength(str) + 1;
        }
        return at.get(str);
      },
      bytes: () => Buffer.from(parts.join(''), 'latin1'),
    };
  };
  const dynstr = strtab();
  const shstr = strtab();
  const versionIndex = new Map();
  let next = 2;
  const verneed = Buffer.alloc(needs.reduce((n, f) => n + 16 + 16 * f.versions.length, 0));
  let at = 0;
  needs.forEach((f, i) => {
    const w = new DataView(verneed.buffer, verneed.byteOffset + at);
    w.setUint16(0, 1, le);
    w.setUint16(2, f.versions.length, le);
    w.setUint32(4, dynstr.add(f.file), le);
    w.setUint32(8, 16, le);
    w.setUint32(12, i === needs.length - 1 ? 0 : 16 + 16 * f.versions.length, le);
    f.versions.forEach((v, k) => {
      const a = new DataView(verneed.buffer, verneed.byteOffset + at + 16 + 16 * k);
      versionIndex.set(v.name ?? v, next);
      a.setUint16(4, v.weak ? 2 : 0, le);
      a.setUint16(6, next++, le);
      a.setUint32(8, dynstr.add(v.name ?? v), le);
      a.setUint32(12, k === f.versions.length - 1 ? 0 : 16, le);
    });
    at += 16 + 16 * f.versions.length;
  });
  const dynsym = Buffer.alloc(24 * (symbols.length + 1));
  const versym = Buffer.alloc(2 * (symbols.length + 1));
  symbols.forEach(([name, version], i) => {
    new DataView(dynsym.buffer, dynsym.byteOffset).setUint32(24 * (i + 1), dynstr.add(name), le);
    new DataView(versym.buffer, versym.byteOffset).setUint16(2 * (i + 1), version ? versionIndex.get(version) : 1, le);
  });
  const dynamic = Buffer.alloc(16 * (needed.length + 1)); // DT_NEEDED entries, then DT_NULL
  needed.forEach((name, i) => {
    const d = new DataView(dynamic.buffer, dynamic.byteOffset + 16 * i);
    d.setBigInt64(0, 1n, le);
    d.setBigUint64(8, BigInt(dynstr.add(name)), le);
  });
  // [name, type, data, link, info, entsize]; indices: 1 .dynstr, 2 .dynsym, 3 .gnu.version, 4 .gnu.version_r
  const sections = [
    ['.dynstr', 3, dynstr.bytes(), 0, 0, 0],
    ['.dynsym', 11, dynsym, 1, 1, 24],
    ['.gnu.version', 0x6fffffff, versym, 2, 0, 2],
    ['.gnu.version_r', 0x6ffffffe, verneed, 1, needs.length, 0],
    ...(symtab ? [['.symtab', 2, Buffer.alloc(48), 6, 1, 24], ['.strtab', 3, Buffer.from('\0'), 0, 0, 0]] : []),
  ];
  if (needed.length > 0) sections.push(['.dynamic', 6, dynamic, 1, 0, 16]);
  for (const sec of sections) shstr.add(sec[0]);
  shstr.add('.shstrtab');
  sections.push(['.shstrtab', 3, shstr.bytes(), 0, 0, 0]);
  const body = [];
  let offset = 64;
  const placed = sections.map(([name, type, data, link, info, entsize]) => {
    const here = offset;
    body.push(data);
    offset += data.length;
    return { name: shstr.add(name), type, offset: here, size: data.length, link, info, entsize };
  });
  const shoff = offset;
  const file = Buffer.alloc(shoff + 64 * (placed.length + 1));
  const v = new DataView(file.buffer, file.byteOffset);
  file.set([0x7f, 0x45, 0x4c, 0x46, 2, le ? 1 : 2, 1]);
  v.setUint16(16, 3, le); // ET_DYN
  v.setUint16(18, machine, le); // e_machine
  v.setUint32(20, 1, le);
  v.setBigUint64(0x28, BigInt(shoff), le);
  v.setUint16(0x34, 64, le);
  v.setUint16(0x3a, 64, le);
  v.setUint16(0x3c, placed.length + 1, le);
  v.setUint16(0x3e, placed.length, le);
  Buffer.concat(body).copy(file, 64);
  placed.forEach((sec, i) => {
    const h = shoff + 64 * (i + 1);
    v.setUint32(h, sec.name, le);
    v.setUint32(h + 4, sec.type, le);
    v.setBigUint64(h + 24, BigInt(sec.offset), le);
    v.setBigUint64(h + 32, BigInt(sec.size), le);
    v.setUint32(h + 40, sec.link, le);
    v.setUint32(h + 44, sec.info, le);
    v.setBigUint64(h + 56, BigInt(sec.entsize), le);
  });
  return file;
}


const MH_MAGIC_64 = 0xfeedfacf;
const LC_SYMTAB = 0x2;
const LC_LOAD_DYLIB = 0xc;
const LC_VERSION_MIN_MACOSX = 0x24;
const LC_BUILD_VERSION = 0x32;
const encodeVersion = (v) => {
  const [major, minor = 0, patch = 0] = v.split('.').map(Number);
  return ((major << 16) | (minor << 8) | patch) >>> 0;
};

// A minimal thin 64-bit Mach-O: the header, one LC_BUILD_VERSION (or LC_VERSION_MIN_MACOSX
// with `versionMin`) unless `minMacos` is null, an LC_LOAD_DYLIB per `dylibs`, and an
// LC_SYMTAB whose symbols are `imports` ([name, library ordinal]: 1… a dylib, 0xfe dynamic
// lookup), then `locals` local and `stabs` debug entries (what strip removes).
export function macho({ cpuType = 0x01000007, fileType = 0x6, minMacos = '10.13', versionMin = false, dylibs = ['/usr/lib/libSystem.B.dylib'], imports = [], locals = 0, stabs = 0 } = {}) {
  const cmds = [];
  if (minMacos !== null) {
    const c = Buffer.alloc(versionMin ? 16 : 24);
    if (versionMin) {
      c.writeUInt32LE(LC_VERSION_MIN_MACOSX, 0);
      c.writeUInt32LE(16, 4);
      c.writeUInt32LE(encodeVersion(minMacos), 8);
      c.writeUInt32LE(encodeVersion('14.0'), 12);
    } else {
      c.writeUInt32LE(LC_BUILD_VERSION, 0);
      c.writeUInt32LE(24, 4);
      c.writeUInt32LE(1, 8); // PLATFORM_MACOS
      c.writeUInt32LE(encodeVersion(minMacos), 12);
      c.writeUInt32LE(encodeVersion('14.0'), 16);
    }
    cmds.push(c);
  }
  for (const name of dylibs) {
    const size = Math.ceil((24 + Buffer.byteLength(name) + 1) / 8) * 8;
    const c = Buffer.alloc(size);
    c.writeUInt32LE(LC_LOAD_DYLIB, 0);
    c.writeUInt32LE(size, 4);
    c.writeUInt32LE(24, 8); // the name's offset in the command
    c.write(name, 24, 'latin1');
    cmds.push(c);
  }
  const symtab = Buffer.alloc(24);
  symtab.writeUInt32LE(LC_SYMTAB, 0);
  symtab.writeUInt32LE(24, 4);
  cmds.push(symtab);
  const sizeofcmds = cmds.reduce((n, c) => n + c.length, 0);

  const strings = ['\0'];
  let strsize = 1;
  const name = (s) => {
    const at = strsize;
    strings.push(`${s}\0`);
    strsize += Buffer.byteLength(s) + 1;
    return at;
  };
  const entries = [];
  const entry = (strx, type, desc) => {
    const e = Buffer.alloc(16);
    e.writeUInt32LE(strx, 0);
    e.writeUInt8(type, 4);
    e.writeUInt16LE(desc, 6);
    entries.push(e);
  };
  for (let i = 0; i < stabs; i++) entry(name(`stab${i}`), 0x24, 0); // N_FUN
  for (let i = 0; i < locals; i++) entry(name(`_local${i}`), 0x0e, 0); // N_SECT, not N_EXT
  for (const [sym, ordinal] of imports) entry(name(sym), 0x01, ordinal << 8); // N_UNDF | N_EXT
  const symoff = 32 + sizeofcmds;
  const stroff = symoff + 16 * entries.length;
  symtab.writeUInt32LE(symoff, 8);
  symtab.writeUInt32LE(entries.length, 12);
  symtab.writeUInt32LE(stroff, 16);
  symtab.writeUInt32LE(strsize, 20);

  const header = Buffer.alloc(32);
  header.writeUInt32LE(MH_MAGIC_64, 0);
  header.writeUInt32LE(cpuType, 4);
  header.writeUInt32LE(fileType, 12);
  header.writeUInt32LE(cmds.length, 16);
  header.writeUInt32LE(sizeofcmds, 20);
  header.writeUInt32LE(0x85, 24); // MH_NOUNDEFS | MH_DYLDLINK | MH_TWOLEVEL
  return Buffer.concat([header, ...cmds, ...entries, Buffer.from(strings.join(''), 'latin1')]);
}

// A minimal PE32+ image: MZ header, PE header, a 240-byte optional header with 16 data
// directories, and one section (RVA 0x1000, file offset 0x200) holding the import table
// (`imports`: [{ dll, functions }], a function `#n` imported by ordinal) and the delay-load
// import table (`delayed`, same shape).
export function pe({ machine = 0x8664, dll = true, imports = [], delayed = [], optionalMagic = 0x20b } = {}) {
  const RVA = 0x1000;
  const RAW = 0x200;
  const data = [];
  let size = 0;
  const reserve = (n) => {
    const at = size;
    size += n;
    return at;
  };
  const idt = reserve(20 * (imports.length + 1));
  const ddt = reserve(32 * (delayed.length + 1));
  const later = [];
  const table = (list, base, stride, nameAt, lookupAt) =>
    list.forEach((lib, i) => {
      const ilt = reserve(8 * (lib.functions.length + 1));
      const names = lib.functions.map((f) => (f.startsWith('#') ? null : reserve(2 + Buffer.byteLength(f) + 1)));
      const dllName = reserve(Buffer.byteLength(lib.dll) + 1);
      later.push((buf) => {
        buf.writeUInt32LE(RVA + dllName, base + stride * i + nameAt);
        buf.writeUInt32LE(RVA + ilt, base + stride * i + lookupAt);
        buf.write(lib.dll, dllName, 'latin1');
        lib.functions.forEach((f, k) => {
          if (f.startsWith('#')) buf.writeBigUInt64LE((1n << 63n) | BigInt(Number(f.slice(1))), ilt + 8 * k);
          else {
            buf.writeBigUInt64LE(BigInt(RVA + names[k]), ilt + 8 * k);
            buf.write(f, names[k] + 2, 'latin1');
          }
        });
      });
    });
  table(imports, idt, 20, 12, 0);
  table(delayed, ddt, 32, 4, 16);
  const section = Buffer.alloc(Math.ceil(size / 0x200) * 0x200 || 0x200);
  for (const f of later) f(section);
  data.push(section);

  const file = Buffer.alloc(RAW + section.length);
  file.write('MZ', 0, 'latin1');
  file.writeUInt32LE(0x40, 0x3c);
  const pe = 0x40;
  file.writeUInt32LE(0x00004550, pe);
  file.writeUInt16LE(machine, pe + 4);
  file.writeUInt16LE(1, pe + 6); // one section
  file.writeUInt16LE(240, pe + 20);
  file.writeUInt16LE(0x0022 | (dll ? 0x2000 : 0), pe + 22);
  const opt = pe + 24;
  file.writeUInt16LE(optionalMagic, opt);
  file.writeUInt32LE(16, opt + 108);
  if (imports.length > 0) {
    file.writeUInt32LE(RVA + idt, opt + 112 + 8 * 1);
    file.writeUInt32LE(20 * (imports.length + 1), opt + 116 + 8 * 1);
  }
  if (delayed.length > 0) {
    file.writeUInt32LE(RVA + ddt, opt + 112 + 8 * 13);
    file.writeUInt32LE(32 * (delayed.length + 1), opt + 116 + 8 * 13);
  }
  const sh = opt + 240;
  file.write('.idata', sh, 'latin1');
  file.writeUInt32LE(section.length, sh + 8);
  file.writeUInt32LE(RVA, sh + 12);
  file.writeUInt32LE(section.length, sh + 16);
  file.writeUInt32LE(RAW, sh + 20);
  section.copy(file, RAW);
  return file;
}
