//! The admission rule of the shared capacity ledger (`PostgresMappingStore` as a
//! coordinator), as a pure function over one pool's hold rows.
//!
//! Why a second copy of the rule and not [`crate::core::capacity::Ledger`] itself? The
//! in-process ledger owns its holds in memory and numbers reads with its own counter. A
//! shared ledger's holds are rows that every router process reads inside the admission
//! transaction, and its read sequence is a database sequence, so the state is rebuilt from
//! rows each time. The rule is the same, clause for clause (the tests below pin each
//! against the in-process ledger's): a settled hold is released once a read that started
//! after it settled reports, in every dimension, at least the usage expected when it was
//! admitted; then every dimension must fit `used + held + need <= limit`; the admitted
//! amounts are held, with their expected usage.
//!
//! Expiry (the assumption TTL, and the lease of the process that holds an in-flight hold)
//! is applied by the database before the rows reach this function (`stores/pg.rs`), with the
//! database's clock, so that processes on machines with different clocks agree.

/// One dimension of a validated measurement, with this request's need in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    /// `cpu`, `memory`, `disk`, `sandboxes`, or a custom reader's name.
    pub resource: String,
    /// What the reader reported in use.
    pub used: f64,
    /// The account limit.
    pub limit: f64,
    /// `max(configured demand, request need)`.
    pub need: f64,
}

/// One hold row of the pool being admitted (unexpired).
#[derive(Debug, Clone, PartialEq)]
pub struct HoldRow {
    /// The row's key.
    pub token: i64,
    /// Held amount per dimension.
    pub amounts: Vec<(String, f64)>,
    /// Usage a read must report, per dimension, before this hold counts as reflected.
    pub expect: Vec<(String, f64)>,
    /// Read sequence at which the launch settled successfully (None while in flight).
    pub settled_seq: Option<i64>,
}

/// What the admission transaction must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Insert a hold with these amounts and expectations (and delete `release`).
    Admit {
        /// Holds that this read reflects.
        release: Vec<i64>,
        /// The new hold's amounts.
        amounts: Vec<(String, f64)>,
        /// The new hold's expected usage.
        expect: Vec<(String, f64)>,
    },
    /// A dimension is full (`release` is still deleted).
    Exhausted {
        /// Holds that this read reflects.
        release: Vec<i64>,
        /// The first dimension without room.
        resource: String,
    },
}

/// The decision for a read that started at `read_seq`, reporting `dims`, over the pool's
/// unexpired `holds`.
pub fn decide(holds: &[HoldRow], read_seq: i64, dims: &[Dim]) -> Decision {
    let reflected = |h: &HoldRow| {
        h.settled_seq.is_some_and(|s| s < read_seq)
            && h.expect.iter().all(|(r, e)| dims.iter().find(|d| &d.resource == r).is_some_and(|d| d.used + 1e-9 >= *e))
    };
    let release: Vec<i64> = holds.iter().filter(|h| reflected(h)).map(|h| h.token).collect();
    let kept: Vec<&HoldRow> = holds.iter().filter(|h| !release.contains(&h.token)).collect();
    let mut amounts = Vec::with_capacity(dims.len());
    let mut expect = Vec::with_capacity(dims.len());
    for d in dims {
        let held: f64 =
            kept.iter().flat_map(|h| h.amounts.iter()).filter(|(r, _)| r == &d.resource).map(|(_, a)| *a).sum();
        if d.used + held + d.need > d.limit + 1e-9 {
            return Decision::Exhausted { release, resource: d.resource.clone() };
        }
        amounts.push((d.resource.clone(), d.need));
        expect.push((d.resource.clone(), d.used + held + d.need));
    }
    Decision::Admit { release, amounts, expect }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(used: f64, limit: f64) -> Vec<Dim> {
        vec![Dim { resource: "sandboxes".into(), used, limit, need: 1.0 }]
    }

    /// Applies a decision to `rows` as the transaction would; returns the new token.
    fn apply(rows: &mut Vec<HoldRow>, d: &Decision, token: i64) -> Option<i64> {
        match d {
            Decision::Admit { release, amounts, expect } => {
                rows.retain(|h| !release.contains(&h.token));
                rows.push(HoldRow { token, amounts: amounts.clone(), expect: expect.clone(), settled_seq: None });
                Some(token)
            }
            Decision::Exhausted { release, .. } => {
                rows.retain(|h| !release.contains(&h.token));
                None
            }
        }
    }

    #[test]
    fn admits_while_every_dimension_fits_and_refuses_when_one_does_not() {
        let mut rows = Vec::new();
        for t in 1..=10 {
            let d = decide(&rows, t, &slots(0.0, 10.0));
            assert!(apply(&mut rows, &d, t).is_some(), "hold {t}");
        }
        let d = decide(&rows, 11, &slots(0.0, 10.0));
        assert!(matches!(d, Decision::Exhausted { ref resource, .. } if resource == "sandboxes"));
    }

    #[test]
    fn settled_hold_is_released_by_a_later_read_that_reflects_it_must_fire() {
        let mut rows = vec![HoldRow {
            token: 1,
            amounts: vec![("sandboxes".into(), 1.0)],
            expect: vec![("sandboxes".into(), 1.0)],
            settled_seq: Some(5),
        }];
        // A read that started after the settle and counts the sandbox: released.
        let d = decide(&rows, 6, &slots(1.0, 1.0));
        assert_eq!(d, Decision::Exhausted { release: vec![1], resource: "sandboxes".into() });
        apply(&mut rows, &d, 2);
        assert!(rows.is_empty());
    }

    #[test]
    fn settled_hold_is_kept_by_a_lagging_or_earlier_read_must_not_fire() {
        let rows = vec![HoldRow {
            token: 1,
            amounts: vec![("sandboxes".into(), 1.0)],
            expect: vec![("sandboxes".into(), 1.0)],
            settled_seq: Some(5),
        }];
        // Lagging: started after, but does not count it yet.
        assert_eq!(
            decide(&rows, 6, &slots(0.0, 1.0)),
            Decision::Exhausted { release: vec![], resource: "sandboxes".into() }
        );
        // Started before the settle, even though it reports enough usage.
        assert_eq!(
            decide(&rows, 5, &slots(1.0, 2.0)),
            Decision::Exhausted { release: vec![], resource: "sandboxes".into() }
        );
    }

    #[test]
    fn in_flight_hold_is_never_released_by_a_read() {
        let rows = vec![HoldRow {
            token: 1,
            amounts: vec![("sandboxes".into(), 1.0)],
            expect: vec![("sandboxes".into(), 1.0)],
            settled_seq: None,
        }];
        assert!(
            matches!(decide(&rows, 100, &slots(1.0, 1.0)), Decision::Exhausted { ref release, .. } if release.is_empty())
        );
    }

    #[test]
    fn expectation_counts_everything_held_so_one_read_cannot_release_two_holds() {
        let mut rows = Vec::new();
        let d = decide(&rows, 1, &slots(0.0, 3.0));
        apply(&mut rows, &d, 1);
        let d = decide(&rows, 2, &slots(0.0, 3.0));
        apply(&mut rows, &d, 2);
        for h in &mut rows {
            h.settled_seq = Some(3);
        }
        // One sandbox reflected: only the first hold (expect 1) goes; the second expects 2.
        let d = decide(&rows, 4, &slots(1.0, 3.0));
        match d {
            Decision::Admit { release, expect, .. } => {
                assert_eq!(release, vec![1]);
                assert_eq!(expect, vec![("sandboxes".to_string(), 3.0)]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn agrees_with_the_in_process_ledger_on_a_lagging_reader() {
        use crate::core::capabilities::Resources;
        use crate::core::capacity::{Admission, Ledger, Measurement, ResourceMeasurement};
        let mut ledger = Ledger::new(60_000);
        let mut rows: Vec<HoldRow> = Vec::new();
        let mut seq = 0i64;
        let mut launched = 0.0f64;
        for i in 0..30 {
            let used = (launched - 3.0).max(0.0);
            let s = ledger.begin_read();
            seq += 1;
            let m = Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, 10.0, "sandboxes", 1.0)]);
            let a = ledger.admit(0, s, &m, &Resources::default(), 0);
            let d = decide(&rows, seq, &slots(used, 10.0));
            let token = apply(&mut rows, &d, 1000 + i);
            assert_eq!(matches!(a, Admission::Admitted(_)), token.is_some(), "read {i}");
            if let (Admission::Admitted(t), Some(tok)) = (a, token) {
                launched += 1.0;
                ledger.settle(t, true, 0);
                seq += 1;
                rows.iter_mut().filter(|h| h.token == tok).for_each(|h| h.settled_seq = Some(seq));
            }
        }
        assert!(launched <= 10.0);
    }
}
