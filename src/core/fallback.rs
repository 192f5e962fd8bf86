//! When a failed launch may advance to the next pool.
//!
//! Why so strict? A provider may allocate remotely and then throw. Falling back after
//! such a failure risks a second, unrecorded sandbox. So a failure advances only when a
//! caller-supplied classifier *proved* it happened before allocation (`retryable: true`),
//! fallback is allowed, and the attempt bound has room. Anything else is terminal.

/// What a classifier said about one failure, after sanitizing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// Sanitized SCREAMING_SNAKE code.
    pub code: String,
    /// True only when the classifier returned exactly `retryable: true`.
    pub retryable: bool,
}

/// Code used when there is no classifier, or it failed or answered nonsense.
pub const OUTCOME_UNKNOWN: &str = "PROVIDER_LAUNCH_OUTCOME_UNKNOWN";
/// Code used when a classifier threw or rejected.
pub const CLASSIFIER_FAILED: &str = "PROVIDER_CLASSIFIER_FAILED";

/// True for a code of 1–64 characters of `[A-Z0-9_]`, starting with a letter.
pub fn is_code(code: &str) -> bool {
    let b = code.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_uppercase()
        && b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// Sanitizes a classifier's answer. `code` and `retryable` are what the classifier
/// returned, if they were a string and a boolean; anything else is outcome-unknown.
pub fn sanitize(code: Option<&str>, retryable: Option<bool>) -> Classification {
    match (code, retryable) {
        (Some(c), Some(r)) if is_code(c) => Classification { code: c.to_string(), retryable: r },
        _ => Classification { code: OUTCOME_UNKNOWN.to_string(), retryable: false },
    }
}

/// The decision after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Launch on the candidate at this position.
    Advance(usize),
    /// Stop: the failure was terminal.
    Terminal,
    /// Stop: every allowed attempt (or candidate) was used on retryable failures.
    Exhausted,
}

/// Decides what follows failed attempt number `attempts_made` (1-based count of launches
/// so far) given its classification, the attempt bound and the number of candidates.
pub fn after_failure(
    c: &Classification,
    fallback_allowed: bool,
    attempts_made: usize,
    max_attempts: usize,
    candidates: usize,
) -> Next {
    if !c.retryable || !fallback_allowed {
        return Next::Terminal;
    }
    if attempts_made >= max_attempts || attempts_made >= candidates {
        return Next::Exhausted;
    }
    Next::Advance(attempts_made)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retryable() -> Classification {
        sanitize(Some("PROVIDER_CAPACITY_PRE_ALLOCATION"), Some(true))
    }

    #[test]
    fn retryable_failure_advances_when_allowed_and_bounded() {
        assert_eq!(after_failure(&retryable(), true, 1, 3, 5), Next::Advance(1));
    }

    #[test]
    fn retryable_failure_does_not_advance_when_forbidden() {
        assert_eq!(after_failure(&retryable(), false, 1, 3, 5), Next::Terminal);
    }

    #[test]
    fn retryable_failure_stops_at_the_attempt_bound_and_at_the_last_candidate() {
        assert_eq!(after_failure(&retryable(), true, 3, 3, 5), Next::Exhausted);
        assert_eq!(after_failure(&retryable(), true, 2, 3, 2), Next::Exhausted);
    }

    #[test]
    fn non_retryable_failure_is_terminal() {
        let c = sanitize(Some("X"), Some(false));
        assert_eq!(after_failure(&c, true, 1, 3, 5), Next::Terminal);
    }

    #[test]
    fn nonsense_answers_become_outcome_unknown() {
        for (code, r) in
            [(None, Some(true)), (Some("lower"), Some(true)), (Some("A B"), Some(true)), (Some("OK"), None)]
        {
            let c = sanitize(code, r);
            assert_eq!(c.code, OUTCOME_UNKNOWN);
            assert!(!c.retryable);
        }
        assert!(!is_code(&"A".repeat(65)));
    }
}
