//! The Levee fault drill: prove a configuration against scripted provider
//! faults before production does.
//!
//! The scenario runner lands with its own issue. What is here today:
//!
//! - [`classify_cmd`]: `levee-drill classify`, which reads provider
//!   responses as JSON lines and prints how Levee classifies each one;
//! - [`samples`]: a built-in set of real provider responses, classified in a
//!   table when `levee-drill` runs with no argument.

pub mod classify_cmd;
pub mod samples;
