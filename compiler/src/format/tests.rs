//! Tests of the layout rules on small inputs.

use super::format;

fn fmt(text: &str) -> String {
    format(text).unwrap_or_else(|error| panic!("cannot format: {:?}", error.diagnostics))
}
