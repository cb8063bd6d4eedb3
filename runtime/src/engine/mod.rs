//! The engine: the scheduler (`run`) and the pure policies it wires in. The engine does no I/O.
//!
//! Everything the scheduler does to the outside world — a model call, a tool call, the
//! clock, a timer, a person's answer, a trace event, a delivery — goes through the
//! traits of [`effects`], which the layer above (`world`) implements: live providers and
//! a journal, or a recording played back. The policies (`gate`, `repair`, `budget`,
//! `candidate`, `chat`, `dag`, `feedback`, `session`, `permit`, `eval`, `validate`, `prompt`)
//! are functions of their inputs. The engine imports only `formats` below it.

pub mod budget;
pub mod candidate;
pub mod chat;
pub mod dag;
pub mod effects;
pub mod eval;
pub mod feedback;
pub mod gate;
pub mod mention;
pub mod models;
pub mod permit;
pub mod prompt;
pub mod provider;
pub mod repair;
pub mod run;
pub mod session;
pub mod validate;
pub mod value;
