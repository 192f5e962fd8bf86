//! What a provider pool declares it can do, and the vocabulary both sides use.
//!
//! Why declared and never probed? Several adapters ship `start`/`stop`/`findAllByLabels`
//! that exist but do nothing, so method presence proves nothing. A registration states
//! its pool's envelope; a request states its hard requirements; the router compares the
//! two and treats anything undeclared as "no".

use crate::core::json::{object, FieldError, Obj};
use serde_json::Value;

/// Named capabilities a pool may declare and a request may require or forbid.
/// Custom capabilities are allowed when prefixed with `x-` (e.g. `x-fpga`), so a typo in
/// a known name is an error instead of a requirement that silently matches nothing.
pub const NAMED_CAPABILITIES: &[&str] = &[
    "syncExec",
    "asyncExec",
    "fileTransfer",
    "pty",
    "publicPorts",
    "tailnet",
    "longRunningProcesses",
    "stablePid",
    "processRestart",
    "unattendedEnrollment",
    "nestedUserNamespaces",
    "privileged",
    "docker",
    "gpu",
    "snapshots",
    "warmLease",
    "lifecycle",
    "persistentVolumes",
    "ssh",
];

/// Bit of a known named capability in a capability mask (custom `x-` names have none).
pub fn capability_bit(name: &str) -> Option<u64> {
    NAMED_CAPABILITIES.iter().position(|n| *n == name).map(|i| 1u64 << i)
}

/// True for a known named capability or an `x-` custom one.
pub fn is_capability_name(name: &str) -> bool {
    NAMED_CAPABILITIES.contains(&name) || (name.len() > 2 && name.starts_with("x-"))
}

/// Timeout semantics a pool may honour.
pub const TIMEOUT_SEMANTICS: &[&str] = &["command-lifetime", "sandbox-lifetime", "idle"];

/// Egress classes, from closed to open.
pub const EGRESS_CLASSES: &[&str] = &["none", "allowlist", "open"];

/// State durability levels, weakest first.
pub const DURABILITY_LEVELS: &[&str] = &["ephemeral", "session", "persistent"];

/// Isolation levels, weakest first. `none` is a plain host process (the local runtime).
pub const ISOLATION_LEVELS: &[&str] = &["none", "process", "container", "gvisor", "microvm", "vm"];

/// Position of `level` in an ordered vocabulary.
pub fn rank_of(levels: &[&str], level: &str) -> usize {
    levels.iter().position(|l| *l == level).unwrap_or(0)
}

/// The longest life a pool grants one sandbox.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lifetime {
    /// Not declared: never satisfies a lifetime requirement.
    Unknown,
    /// Declared `null`: no cap.
    Unbounded,
    /// A finite, inclusive cap in milliseconds.
    Capped(f64),
}

/// Reads one resource dimension.
pub type Accessor = fn(&Resources) -> f64;

/// Per-sandbox resource envelope (pool maxima, or a request's needs). Undeclared = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Resources {
    /// vCPUs.
    pub cpu: f64,
    /// Memory in MiB.
    pub memory_mb: f64,
    /// Disk in MiB.
    pub disk_mb: f64,
    /// GPUs.
    pub gpu: f64,
}

impl Resources {
    /// Dimension names, in report order, with accessors.
    pub const DIMENSIONS: [(&'static str, Accessor); 4] =
        [("cpu", |r| r.cpu), ("memoryMb", |r| r.memory_mb), ("diskMb", |r| r.disk_mb), ("gpu", |r| r.gpu)];

    /// Reads `{ cpu?, memoryMb?, diskMb?, gpu? }`.
    pub fn read(o: &Obj<'_>) -> Result<Resources, FieldError> {
        Ok(Resources {
            cpu: o.non_negative("cpu")?.unwrap_or(0.0),
            memory_mb: o.non_negative("memoryMb")?.unwrap_or(0.0),
            disk_mb: o.non_negative("diskMb")?.unwrap_or(0.0),
            gpu: o.non_negative("gpu")?.unwrap_or(0.0),
        })
    }
}

/// Keys of a resources object.
pub const RESOURCE_KEYS: &[&str] = &["cpu", "memoryMb", "diskMb", "gpu"];

/// A pool's declared envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Capabilities {
    /// Named capabilities (known vocabulary or `x-…`).
    pub supported: Vec<String>,
    /// Image identity the pool launches, if declared.
    pub image_identity: Option<String>,
    /// Binaries present in that image.
    pub binaries: Vec<String>,
    /// Egress class, if declared.
    pub egress: Option<&'static str>,
    /// Timeout semantics honoured.
    pub timeout_semantics: Vec<&'static str>,
    /// Timeout granularity in ms, if declared.
    pub timeout_granularity_ms: Option<f64>,
    /// Longest sandbox life.
    pub max_lifetime: Lifetime,
    /// State durability, if declared.
    pub durability: Option<&'static str>,
    /// Restrictions the pool enforces.
    pub restrictions: Vec<String>,
    /// Regions the pool launches in.
    pub regions: Vec<String>,
    /// Per-sandbox maxima.
    pub resources: Resources,
    /// Isolation level, if declared.
    pub isolation: Option<&'static str>,
    /// Bits of the declared known capabilities (see [`capability_bit`]); lets the hot path
    /// test "has every required capability" with one AND instead of string compares.
    pub mask: u64,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            supported: Vec::new(),
            image_identity: None,
            binaries: Vec::new(),
            egress: None,
            timeout_semantics: Vec::new(),
            timeout_granularity_ms: None,
            max_lifetime: Lifetime::Unknown,
            durability: None,
            restrictions: Vec::new(),
            regions: Vec::new(),
            resources: Resources::default(),
            isolation: None,
            mask: 0,
        }
    }
}

/// Keys of `ProviderDefinition.capabilities`.
pub const CAPABILITY_KEYS: &[&str] = &[
    "supported",
    "image",
    "egress",
    "timeout",
    "stateDurability",
    "restrictions",
    "regions",
    "resources",
    "isolation",
];

impl Capabilities {
    /// Reads a declaration. `path` is the field's dotted path for errors.
    pub fn read(value: &Value, path: &str) -> Result<Capabilities, FieldError> {
        let o = object(value, path, CAPABILITY_KEYS)?;
        let supported = o.strings("supported")?.unwrap_or_default();
        for (i, name) in supported.iter().enumerate() {
            if !is_capability_name(name) {
                return Err(FieldError::new(
                    format!("{}[{i}]", o.field("supported")),
                    "must be a known capability name or start with x-",
                ));
            }
        }
        let mask = supported.iter().filter_map(|n| capability_bit(n)).fold(0, |m, b| m | b);
        let mut caps = Capabilities { supported, mask, ..Capabilities::default() };
        if let Some(image) = o.object("image", &["identity", "binaries"])? {
            caps.image_identity = image.string("identity")?.map(str::to_string);
            caps.binaries = image.strings("binaries")?.unwrap_or_default();
        }
        caps.egress = o.choice("egress", EGRESS_CLASSES)?;
        if let Some(t) = o.object("timeout", &["semantics", "granularityMs", "maxSandboxLifetimeMs"])? {
            caps.timeout_semantics = t.choices("semantics", TIMEOUT_SEMANTICS)?.unwrap_or_default();
            caps.timeout_granularity_ms = t.non_negative("granularityMs")?;
            caps.max_lifetime = match t.get("maxSandboxLifetimeMs") {
                None => Lifetime::Unknown,
                Some(Value::Null) => Lifetime::Unbounded,
                Some(_) => match t.non_negative("maxSandboxLifetimeMs") {
                    Ok(Some(ms)) => Lifetime::Capped(ms),
                    _ => {
                        return Err(FieldError::new(
                            t.field("maxSandboxLifetimeMs"),
                            "must be a finite number >= 0, or null for unbounded",
                        ))
                    }
                },
            };
        }
        caps.durability = o.choice("stateDurability", DURABILITY_LEVELS)?;
        caps.restrictions = o.strings("restrictions")?.unwrap_or_default();
        caps.regions = o.strings("regions")?.unwrap_or_default();
        if let Some(r) = o.object("resources", RESOURCE_KEYS)? {
            caps.resources = Resources::read(&r)?;
        }
        caps.isolation = o.choice("isolation", ISOLATION_LEVELS)?;
        Ok(caps)
    }

    /// True when the pool declares `name`.
    pub fn has(&self, name: &str) -> bool {
        // A known name is one bit of the mask (in the pool's record, where the list's
        // strings are elsewhere on the heap); a custom one is looked up in the list.
        match capability_bit(name) {
            Some(bit) => self.mask & bit != 0,
            None => self.supported.iter().any(|s| s == name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_full_declaration() {
        let caps = Capabilities::read(
            &json!({
                "supported": ["pty", "x-fpga"],
                "image": {"identity": "agent-v4", "binaries": ["node"]},
                "egress": "open",
                "timeout": {"semantics": ["command-lifetime"], "granularityMs": 1000, "maxSandboxLifetimeMs": null},
                "stateDurability": "session",
                "restrictions": ["read-only-root"],
                "regions": ["eu-west"],
                "resources": {"cpu": 4, "memoryMb": 8192},
                "isolation": "microvm"
            }),
            "capabilities",
        )
        .unwrap();
        assert!(caps.has("pty") && caps.has("x-fpga"));
        assert_eq!(caps.max_lifetime, Lifetime::Unbounded);
        assert_eq!(caps.resources.cpu, 4.0);
        assert_eq!(caps.resources.gpu, 0.0);
        assert_eq!(caps.isolation, Some("microvm"));
    }

    #[test]
    fn omitted_lifetime_is_unknown_and_number_is_capped() {
        let caps = Capabilities::read(&json!({"timeout": {}}), "c").unwrap();
        assert_eq!(caps.max_lifetime, Lifetime::Unknown);
        let caps = Capabilities::read(&json!({"timeout": {"maxSandboxLifetimeMs": 5}}), "c").unwrap();
        assert_eq!(caps.max_lifetime, Lifetime::Capped(5.0));
    }

    #[test]
    fn misspelled_capability_is_refused() {
        let err = Capabilities::read(&json!({"supported": ["ptty"]}), "capabilities").unwrap_err();
        assert_eq!(err.field, "capabilities.supported[0]");
    }

    #[test]
    fn non_finite_lifetime_text_is_refused() {
        let err = Capabilities::read(&json!({"timeout": {"maxSandboxLifetimeMs": "NaN"}}), "c").unwrap_err();
        assert_eq!(err.field, "c.timeout.maxSandboxLifetimeMs");
    }
}
