// Text stubs (.tbd) of the two macOS frameworks the dependency tree links, for the macOS
// builds on a machine without Apple's SDK (scripts/build-platforms.mjs, darwin-*).
//
// Why they are needed: tokio-postgres depends on whoami, whose macOS code (the computer
// name) goes through objc2-system-configuration and objc2-core-foundation, and those crates
// carry `#[link(name = "SystemConfiguration" / "CoreFoundation", kind = "framework")]`. So
// the linker is handed `-framework CoreFoundation -framework SystemConfiguration` and must
// find each framework, although the addon never calls that code (tokio-postgres asks whoami
// for the user name only). Zig brings libSystem's stubs but no framework; Apple's SDK
// cannot be fetched on these machines.
//
// A .tbd file is what Apple's SDK itself ships instead of each library: YAML naming the
// library's install name (the path dyld loads at run time) and the symbols it exports. The
// install names below are the frameworks' fixed paths on every macOS since 10.0. The
// exported-symbol lists name what the addon imports from each (checked: the Mach-O check
// of scripts/check-binary.mjs refuses any non-napi symbol left to dynamic lookup, so a
// symbol missing here fails the build instead of shipping). The release workflow's macOS
// test jobs then load the very binary built this way on real macOS.

import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Framework -> the symbols the addon imports from it: what whoami's `devicename` and
 * objc2-core-foundation's string and error helpers reference (read from a build linked
 * against empty stubs, where zig left exactly these unbound).
 */
export const FRAMEWORKS = Object.freeze({
  CoreFoundation: ['_CFCopyDescription', '_CFErrorCopyDescription', '_CFGetRetainCount', '_CFRelease', '_CFStringGetBytes', '_CFStringGetCStringPtr', '_CFStringGetLength'],
  SystemConfiguration: ['_SCDynamicStoreCopyComputerName'],
});

/**
 * A short digest of the stubs' text: the build names the stub folder after it, so a change
 * to a stub changes the linker flags and Cargo relinks (it cannot see the files themselves).
 */
export function stubsDigest() {
  return createHash('sha256')
    .update(Object.keys(FRAMEWORKS).map((n) => frameworkStub(n)).join('\0'))
    .digest('hex')
    .slice(0, 12);
}

/** The .tbd (v4) text of one framework's stub. */
export function frameworkStub(name, symbols = FRAMEWORKS[name]) {
  const targets = '[ x86_64-macos, arm64-macos ]';
  const lines = [
    '--- !tapi-tbd',
    'tbd-version:     4',
    `targets:         ${targets}`,
    `install-name:    '/System/Library/Frameworks/${name}.framework/Versions/A/${name}'`,
    'current-version: 1',
    'compatibility-version: 1',
  ];
  if (symbols.length > 0) {
    lines.push('exports:', `  - targets:         ${targets}`, `    symbols:         [ ${symbols.join(', ')} ]`);
  }
  lines.push('...', '');
  return lines.join('\n');
}

/**
 * Writes `<dir>/System/Library/Frameworks/<Name>.framework/<Name>.tbd` for each framework
 * and returns the Frameworks folder (what the linker's `-F` names).
 */
export function writeFrameworkStubs(dir) {
  const frameworks = join(dir, 'System', 'Library', 'Frameworks');
  for (const name of Object.keys(FRAMEWORKS)) {
    const folder = join(frameworks, `${name}.framework`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `${name}.tbd`), frameworkStub(name));
  }
  return frameworks;
}
