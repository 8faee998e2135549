//! The Levee fault drill. (Filled in by issues 2 and 7.)
