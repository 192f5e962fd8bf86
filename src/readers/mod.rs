//! Builtin capacity readers (filled in below).
