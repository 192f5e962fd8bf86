//! The optional packages the router loads on first use, the versions it takes, and what a
//! failed load means.
//!
//! Why optional? A caller using two providers must not need all six vendor SDKs installed,
//! and a router without telemetry must not need `@opentelemetry/api`; so each is a peer
//! dependency loaded by JavaScript the first time it is needed (`lib/provider-adapters.js`,
//! `lib/otel.js`). JavaScript performs the load and reports what happened: whether the
//! thrown error was Node's module-not-found (its `code`), and that error's text. This file
//! decides what the failure *is*: the package itself absent (`PROVIDER_PACKAGE_MISSING`), or
//! installed but broken (`PROVIDER_PACKAGE_LOAD_FAILED`, naming the module it could not find
//! when the text names one). The text is read for one module name only, checked against the
//! npm name rule, and never repeated otherwise: it may hold a path or a caller's secret.

/// An optional package: its npm name, the versions the router takes, and what it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    /// The npm name, e.g. `@agent-relay/sandbox`.
    pub name: &'static str,
    /// The versions the router takes (package.json's `peerDependencies` range), or a
    /// pointer to where they are written.
    pub range: &'static str,
    /// What it is needed for, as the install hint says it: `this provider`, `telemetry`.
    pub purpose: &'static str,
}

/// The builtin providers' adapters.
pub const SANDBOX: Package = Package { name: "@agent-relay/sandbox", range: ">=0.1.10", purpose: PROVIDER };
/// Daytona's SDK (the adapter is given a client built from it).
pub const DAYTONA_SDK: Package = Package { name: "@daytonaio/sdk", range: ">=0.180.0 <0.206.0", purpose: PROVIDER };
/// E2B's SDK.
pub const E2B_SDK: Package = Package { name: "e2b", range: ">=2.35.0 <3.0.0", purpose: PROVIDER };
/// Vercel Sandbox's SDK.
pub const VERCEL_SDK: Package = Package { name: "@vercel/sandbox", range: PEER_RANGE, purpose: PROVIDER };
/// Freestyle's SDK.
pub const FREESTYLE_SDK: Package = Package { name: "freestyle-sandboxes", range: PEER_RANGE, purpose: PROVIDER };
/// Microsandbox's SDK.
pub const MICROSANDBOX_SDK: Package = Package { name: "microsandbox", range: PEER_RANGE, purpose: PROVIDER };
/// The OpenTelemetry API, for the `telemetry` option (the 2.x SDKs' own peer range).
pub const TELEMETRY_API: Package = Package { name: "@opentelemetry/api", range: ">=1.9.0 <2", purpose: "telemetry" };

/// Every optional package (package.json's `peerDependencies` lists the same names).
pub const ALL: [Package; 7] =
    [SANDBOX, DAYTONA_SDK, E2B_SDK, VERCEL_SDK, FREESTYLE_SDK, MICROSANDBOX_SDK, TELEMETRY_API];

const PROVIDER: &str = "this provider";
/// The range of an SDK whose versions `@agent-relay/sandbox` pins itself.
const PEER_RANGE: &str = "(see @agent-relay/sandbox peer dependencies)";

/// The optional package named `name`.
pub fn find(name: &str) -> Option<&'static Package> {
    ALL.iter().find(|p| p.name == name)
}

impl Package {
    /// The install command: `npm install <name>`, with `@"<range>"` when the range is one.
    fn install(&self) -> String {
        let is_range = self.range.starts_with(|c: char| matches!(c, '>' | '=' | '<' | '^' | '~') || c.is_ascii_digit());
        if is_range {
            format!("npm install {}@\"{}\"", self.name, self.range)
        } else {
            format!("npm install {}", self.name)
        }
    }
}

/// Why an optional package is unusable, or an adapter cannot do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageError {
    /// `PROVIDER_PACKAGE_MISSING`: the package is not installed.
    Missing(&'static Package),
    /// `PROVIDER_PACKAGE_LOAD_FAILED`: installed, but a module it needs was not found.
    ModuleMissing(&'static Package, String),
    /// `PROVIDER_PACKAGE_LOAD_FAILED`: installed, but it threw while being imported.
    Threw(&'static Package),
    /// `PROVIDER_PACKAGE_MISSING`: installed, without the export the router needs.
    NoExport(&'static Package, Export),
    /// `PROVIDER_OPERATION_UNSUPPORTED`: the installed adapter of `provider` has no `method`.
    Unsupported {
        /// The builtin provider (`e2b`, …).
        provider: &'static str,
        /// The port method it lacks (one of the port's own names).
        method: &'static str,
    },
}

/// An export the router needs from an optional package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// `@agent-relay/sandbox`'s adapter class for `provider` (`E2BSandboxRuntime`, …).
    Adapter {
        /// The class's name.
        class: &'static str,
        /// The provider it serves.
        provider: &'static str,
    },
    /// An SDK's client class (`Daytona`).
    Client(&'static str),
    /// The OpenTelemetry 1.x API (`context`, `trace`, `metrics`, `isSpanContextValid`).
    TelemetryApi,
}

impl PackageError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            PackageError::Missing(_) | PackageError::NoExport(..) => "PROVIDER_PACKAGE_MISSING",
            PackageError::ModuleMissing(..) | PackageError::Threw(_) => "PROVIDER_PACKAGE_LOAD_FAILED",
            PackageError::Unsupported { .. } => "PROVIDER_OPERATION_UNSUPPORTED",
        }
    }

    /// The class it is raised as.
    pub fn class(&self) -> crate::core::error::ErrorClass {
        use crate::core::error::ErrorClass;
        match self {
            PackageError::Unsupported { .. } => ErrorClass::OperationUnsupported,
            _ => ErrorClass::PackageMissing,
        }
    }

    /// The package the error is about (`packageName`).
    pub fn package(&self) -> &'static Package {
        match self {
            PackageError::Missing(p) | PackageError::ModuleMissing(p, _) | PackageError::Threw(p) => p,
            PackageError::NoExport(p, _) => p,
            PackageError::Unsupported { .. } => &SANDBOX,
        }
    }

    /// The module a broken install could not find (`missingModule`), when known.
    pub fn missing_module(&self) -> Option<&str> {
        match self {
            PackageError::ModuleMissing(_, m) => Some(m),
            _ => None,
        }
    }

    /// The message: the package, the range, what to run; never the loader's text.
    pub fn message(&self) -> String {
        match self {
            PackageError::Missing(p) => format!("{} is not installed; install it to use {}: {}", p.name, p.purpose, p.install()),
            PackageError::ModuleMissing(p, m) => format!(
                "{} is installed but could not be loaded: the module {m} it needs was not found; reinstall it (npm install {}) and check that its version satisfies {}",
                p.name, p.name, p.range
            ),
            PackageError::Threw(p) => format!(
                "{} is installed but failed to load (it threw while being imported); check that its version satisfies {}",
                p.name, p.range
            ),
            PackageError::NoExport(p, Export::Adapter { class, provider }) => {
                format!("{} does not export {class}; install a version that supports {provider}: {}", p.name, p.install())
            }
            PackageError::NoExport(p, Export::Client(class)) => {
                format!("{} does not export {class}; install {}@\"{}\"", p.name, p.name, p.range)
            }
            PackageError::NoExport(p, Export::TelemetryApi) => {
                format!("{} does not export the 1.x API; install {}@\"{}\"", p.name, p.name, p.range)
            }
            PackageError::Unsupported { provider, method } => format!("the {provider} adapter does not implement {method}"),
        }
    }
}

/// What loading `package` failed with, as JavaScript saw it: `not_found` when the thrown
/// error's `code` was Node's module-not-found (`MODULE_NOT_FOUND`, `ERR_MODULE_NOT_FOUND`),
/// and its message text when it had one.
///
/// - Not a module-not-found error at all (or one that could not be read): the package is
///   installed and threw while being imported.
/// - A module-not-found error naming the package itself (or its `package.json`), or naming
///   no module this file can tell: the package is absent.
/// - One naming another module: the package is installed, and that module is missing.
pub fn load_failure(package: &'static Package, not_found: bool, text: Option<&str>) -> PackageError {
    if !not_found {
        return PackageError::Threw(package);
    }
    match text.and_then(missing_module) {
        Some(m) if m != package.name && m != format!("{}/package.json", package.name) => {
            PackageError::ModuleMissing(package, m)
        }
        _ => PackageError::Missing(package),
    }
}

/// Longest module name npm allows.
const MAX_MODULE_NAME: usize = 214;
/// Longest quoted specifier read from a loader's text.
const MAX_SPECIFIER: usize = 1024;

/// The module a module-not-found text names, as a module name: the specifier of "Cannot
/// find package 'x' imported from …" (ESM) or "Cannot find module 'x'" (CommonJS), cut to
/// the part after the last `node_modules/` for a file path. None when it cannot be told.
fn missing_module(text: &str) -> Option<String> {
    let rest = text.strip_prefix("Cannot find ")?;
    let rest = rest.strip_prefix("package '").or_else(|| rest.strip_prefix("module '"))?;
    let quoted = &rest[..rest.find('\'')?];
    if quoted.is_empty() || quoted.chars().nth(MAX_SPECIFIER).is_some() {
        return None;
    }
    let path = quoted.replace('\\', "/");
    let name = match path.rfind("node_modules/") {
        Some(at) => &path[at + "node_modules/".len()..],
        None => &path,
    };
    let name = name.strip_prefix("file://").unwrap_or(name);
    (name.len() <= MAX_MODULE_NAME && is_module_name(name)).then(|| name.to_string())
}

/// An npm package name, optionally scoped, optionally with a subpath: what an error may name.
fn is_module_name(name: &str) -> bool {
    let mut parts = name.split('/');
    let Some(mut first) = parts.next() else { return false };
    if let Some(scope) = first.strip_prefix('@') {
        if !is_name_part(scope) {
            return false;
        }
        match parts.next() {
            Some(n) => first = n,
            None => return false,
        }
    }
    is_name_part(first)
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~@-".contains(&b)))
}

/// `[a-z0-9][a-z0-9._~-]*`.
fn is_name_part(part: &str) -> bool {
    let lower = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match part.as_bytes().split_first() {
        Some((first, rest)) => lower(*first) && rest.iter().all(|&b| lower(b) || b"._~-".contains(&b)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn must_fire_a_not_found_error_naming_the_package_is_missing_with_the_install_hint() {
        let e =
            load_failure(&SANDBOX, true, Some("Cannot find package '@agent-relay/sandbox' imported from /x sk_canary"));
        assert_eq!(e.code(), "PROVIDER_PACKAGE_MISSING");
        assert_eq!(
            e.message(),
            "@agent-relay/sandbox is not installed; install it to use this provider: npm install @agent-relay/sandbox@\">=0.1.10\""
        );
        assert_eq!(e.missing_module(), None);
        let e = load_failure(&VERCEL_SDK, true, Some("Cannot find module '@vercel/sandbox/package.json'"));
        assert_eq!(
            e.message(),
            "@vercel/sandbox is not installed; install it to use this provider: npm install @vercel/sandbox"
        );
        let e = load_failure(&TELEMETRY_API, true, None);
        assert_eq!(e, PackageError::Missing(&TELEMETRY_API));
        assert!(e.message().contains("to use telemetry"));
    }

    #[test]
    fn must_fire_a_not_found_error_naming_another_module_is_load_failed_naming_it() {
        let e = load_failure(&SANDBOX, true, Some("Cannot find package 'ghost-dependency' imported from /tmp/p/x.js"));
        assert_eq!((e.code(), e.missing_module()), ("PROVIDER_PACKAGE_LOAD_FAILED", Some("ghost-dependency")));
        let file = "Cannot find module 'C:\\p\\node_modules\\@agent-relay\\sandbox\\index.js' imported from C:\\p";
        assert_eq!(load_failure(&SANDBOX, true, Some(file)).missing_module(), Some("@agent-relay/sandbox/index.js"));
        let url = "Cannot find module 'file:///p/node_modules/@agent-relay/sandbox/index.js'";
        assert_eq!(load_failure(&SANDBOX, true, Some(url)).missing_module(), Some("@agent-relay/sandbox/index.js"));
    }

    #[test]
    fn must_not_fire_a_text_that_names_no_module_name_is_never_repeated() {
        for text in [
            "Cannot find package '/tmp/secret sk_canary' imported from x",
            "Cannot find package 'UPPER' imported",
            "no module here sk_canary",
            "Cannot find package ''",
            "Cannot find package 'unterminated",
        ] {
            assert_eq!(load_failure(&E2B_SDK, true, Some(text)), PackageError::Missing(&E2B_SDK), "{text}");
        }
        let long = format!("Cannot find package '{}'", "a".repeat(MAX_MODULE_NAME + 1));
        assert_eq!(load_failure(&E2B_SDK, true, Some(&long)), PackageError::Missing(&E2B_SDK));
    }

    #[test]
    fn must_fire_any_other_failure_is_a_package_that_threw_while_imported() {
        let e = load_failure(&E2B_SDK, false, Some("Cannot find package 'x'"));
        assert_eq!(e, PackageError::Threw(&E2B_SDK));
        assert_eq!(
            e.message(),
            "e2b is installed but failed to load (it threw while being imported); check that its version satisfies >=2.35.0 <3.0.0"
        );
    }

    #[test]
    fn missing_exports_and_methods_say_what_to_install() {
        let adapter = Export::Adapter { class: "E2BSandboxRuntime", provider: "e2b" };
        assert_eq!(
            PackageError::NoExport(&SANDBOX, adapter).message(),
            "@agent-relay/sandbox does not export E2BSandboxRuntime; install a version that supports e2b: npm install @agent-relay/sandbox@\">=0.1.10\""
        );
        assert_eq!(
            PackageError::NoExport(&DAYTONA_SDK, Export::Client("Daytona")).message(),
            "@daytonaio/sdk does not export Daytona; install @daytonaio/sdk@\">=0.180.0 <0.206.0\""
        );
        assert_eq!(
            PackageError::NoExport(&TELEMETRY_API, Export::TelemetryApi).message(),
            "@opentelemetry/api does not export the 1.x API; install @opentelemetry/api@\">=1.9.0 <2\""
        );
        let e = PackageError::Unsupported { provider: "e2b", method: "stop" };
        assert_eq!((e.code(), e.package().name), ("PROVIDER_OPERATION_UNSUPPORTED", "@agent-relay/sandbox"));
        assert_eq!(e.class().name(), "ProviderOperationUnsupportedError");
        assert_eq!(e.message(), "the e2b adapter does not implement stop");
    }

    #[test]
    fn every_package_is_found_by_its_name() {
        for p in ALL {
            assert_eq!(find(p.name), Some(&p));
        }
        assert_eq!(find("left-pad"), None);
    }
}
