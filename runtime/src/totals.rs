//! What a run used, added up from its trace: model calls, tokens, cost at the models' prices and the run's (virtual) time — the totals `charter run` and `charter replay` end with.

use std::sync::{Arc, Mutex};

use charter_compiler::graph::CompiledSpec;

use crate::formats::trace::{EventKind, TraceError, TraceEvent, TraceSink};

/// A sink that adds every event to shared totals (read them after the run).
#[derive(Clone, Debug)]
pub struct TotalsSink {
    spec: Arc<CompiledSpec>,
    totals: Arc<Mutex<RunTotals>>,
}

impl TotalsSink {
    pub fn new(spec: Arc<CompiledSpec>) -> Self {
        TotalsSink {
            spec,
            totals: Arc::new(Mutex::new(RunTotals::default())),
        }
    }

    /// The totals so far.
    pub fn totals(&self) -> RunTotals {
        self.totals
            .lock()
            .map(|totals| totals.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

impl TraceSink for TotalsSink {
    fn append(&mut self, event: &TraceEvent) -> Result<(), TraceError> {
        let mut totals = self
            .totals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        totals.add(&self.spec, event);
        Ok(())
    }
}

/// A run's totals so far. Feed it every event in order ([`RunTotals::add`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunTotals {
    /// Model calls made (every attempt, judges included).
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// USD at the prices of each role's model (a model without a price costs nothing).
    pub cost: f64,
    /// Whether any call was made on a model without a price (the cost is then a floor).
    pub unpriced: bool,
    /// The time of the last event, in the run's clock (virtual in a replay).
    pub t_ms: u64,
}

impl RunTotals {
    /// Counts `event` (a `model_call` or `model_result`) for a run of `spec`.
    pub fn add(&mut self, spec: &CompiledSpec, event: &TraceEvent) {
        self.t_ms = self.t_ms.max(event.t_ms);
        match &event.kind {
            EventKind::ModelCall { .. } => self.calls += 1,
            EventKind::ModelResult {
                role,
                input_tokens,
                output_tokens,
                ..
            } => {
                self.input_tokens += input_tokens;
                self.output_tokens += output_tokens;
                let model = spec.roles.get(role).map(|role| &role.model);
                let price_in = model.and_then(|model| model.price_in);
                let price_out = model.and_then(|model| model.price_out);
                if (price_in.is_none() && *input_tokens > 0)
                    || (price_out.is_none() && *output_tokens > 0)
                {
                    self.unpriced = true;
                }
                self.cost += price_in.unwrap_or(0.0) * *input_tokens as f64 / 1e6
                    + price_out.unwrap_or(0.0) * *output_tokens as f64 / 1e6;
            }
            _ => {}
        }
    }

    /// `5 calls, 4,300 tokens (3,100 in, 1,200 out), $0.0123`: the part without time.
    pub fn usage_text(&self) -> String {
        format!(
            "{} call{}, {} tokens ({} in, {} out), ${:.4}{}",
            self.calls,
            if self.calls == 1 { "" } else { "s" },
            thousands(self.input_tokens + self.output_tokens),
            thousands(self.input_tokens),
            thousands(self.output_tokens),
            self.cost,
            if self.unpriced {
                " (some models have no price)"
            } else {
                ""
            }
        )
    }
}

/// `1234567` -> `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
