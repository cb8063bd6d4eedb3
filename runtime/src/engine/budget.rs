//! Budget accounting (DESIGN §4 "Budgets"): tokens, cost from model prices, steps and wall time against the spec's limits.
//!
//! The meter only counts and compares; the scheduler decides what exhaustion means
//! (drop in-flight calls, make no further call, end `failed{budget_exhausted{which}}`).
//! Limits are checked in a fixed order (tokens, cost, wall, steps), so the reason is
//! deterministic when several run out at once.

use std::time::Duration;

use charter_compiler::graph::{BudgetIr, RoleModelIr};
use serde_json::{Number, Value, json};

use crate::engine::provider::Usage;
use crate::formats::trace::{BudgetKind, EventKind};

/// What a run has used so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BudgetMeter {
    limits: BudgetIr,
    pub tokens: u64,
    /// USD, from the models' prices (calls to a model without a price cost nothing).
    pub cost: f64,
    /// Step executions.
    pub steps: u64,
    pub elapsed: Duration,
}

impl BudgetMeter {
    pub fn new(limits: BudgetIr) -> Self {
        BudgetMeter {
            limits,
            ..BudgetMeter::default()
        }
    }

    /// Counts one model call's usage at `model`'s prices.
    pub fn charge(&mut self, model: &RoleModelIr, usage: Usage) {
        self.tokens = self.tokens.saturating_add(usage.total());
        let per_million =
            |price: Option<f64>, tokens: u64| price.unwrap_or(0.0) * tokens as f64 / 1e6;
        self.cost += per_million(model.price_in, usage.input_tokens)
            + per_million(model.price_out, usage.output_tokens);
    }

    /// Counts one step execution.
    pub fn count_step(&mut self) {
        self.steps = self.steps.saturating_add(1);
    }

    /// Sets the run's elapsed time (on the run's clock).
    pub fn set_elapsed(&mut self, elapsed: Duration) {
        self.elapsed = elapsed;
    }

    /// The first limit used up, if any: a limit is used up when the use reaches it
    /// (`steps 40` allows 40 step executions; the 41st is refused).
    pub fn exhausted(&self) -> Option<BudgetKind> {
        let limits = &self.limits;
        if limits.tokens.is_some_and(|limit| self.tokens >= limit) {
            return Some(BudgetKind::Tokens);
        }
        if limits.cost.is_some_and(|limit| self.cost >= limit) {
            return Some(BudgetKind::Cost);
        }
        if limits
            .wall_ms
            .is_some_and(|limit| self.elapsed >= Duration::from_millis(limit))
        {
            return Some(BudgetKind::Wall);
        }
        if limits.steps.is_some_and(|limit| self.steps >= limit) {
            return Some(BudgetKind::Steps);
        }
        None
    }

    /// The time left before `budget.wall` runs out, if it is limited.
    pub fn wall_left(&self) -> Option<Duration> {
        self.limits
            .wall_ms
            .map(|limit| Duration::from_millis(limit).saturating_sub(self.elapsed))
    }

    /// The `budget` trace event for `which`: what was used against the limit.
    pub fn event(&self, which: BudgetKind) -> EventKind {
        let (used, limit) = match which {
            BudgetKind::Tokens => (
                Number::from(self.tokens),
                self.limits.tokens.map(Number::from),
            ),
            BudgetKind::Cost => (
                float(self.cost),
                self.limits.cost.and_then(Number::from_f64),
            ),
            BudgetKind::Wall => (
                Number::from(u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX)),
                self.limits.wall_ms.map(Number::from),
            ),
            BudgetKind::Steps => (
                Number::from(self.steps),
                self.limits.steps.map(Number::from),
            ),
        };
        EventKind::Budget {
            budget: which,
            used,
            limit: limit.unwrap_or_else(|| Number::from(0)),
        }
    }

    /// `run` as expressions see it: `{round, step_count, tokens, cost, elapsed}`
    /// (`elapsed` in milliseconds).
    pub fn run_value(&self, round: u64) -> Value {
        json!({
            "round": round,
            "step_count": self.steps,
            "tokens": self.tokens,
            "cost": float(self.cost),
            "elapsed": u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// A cost as a JSON number, rounded to a micro-dollar so traces stay stable.
fn float(value: f64) -> Number {
    let rounded = (value * 1e6).round() / 1e6;
    Number::from_f64(rounded).unwrap_or_else(|| Number::from(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(price_in: Option<f64>, price_out: Option<f64>) -> RoleModelIr {
        RoleModelIr {
            alias: None,
            provider: "openai".into(),
            model: "m".into(),
            price_in,
            price_out,
            params: Default::default(),
        }
    }

    fn limits() -> BudgetIr {
        BudgetIr {
            tokens: Some(1_000),
            cost: Some(0.01),
            wall_ms: Some(60_000),
            steps: Some(3),
            on_exhausted: None,
        }
    }

    #[test]
    fn usage_is_charged_at_model_prices() {
        let mut meter = BudgetMeter::new(limits());
        meter.charge(
            &model(Some(2.0), Some(10.0)),
            Usage {
                input_tokens: 100,
                output_tokens: 50,
            },
        );
        assert_eq!(meter.tokens, 150);
        assert!((meter.cost - (100.0 * 2.0 + 50.0 * 10.0) / 1e6).abs() < 1e-12);
        meter.charge(
            &model(None, None),
            Usage {
                input_tokens: 100,
                output_tokens: 0,
            },
        );
        assert_eq!(meter.tokens, 250);
        assert_eq!(meter.exhausted(), None);
        assert_eq!(
            meter.run_value(2),
            json!({"round": 2, "step_count": 0, "tokens": 250, "cost": 0.0007, "elapsed": 0})
        );
    }

    #[test]
    fn each_limit_is_reported_in_a_fixed_order() {
        let mut meter = BudgetMeter::new(limits());
        for _ in 0..3 {
            meter.count_step();
        }
        assert_eq!(meter.exhausted(), Some(BudgetKind::Steps));
        meter.set_elapsed(Duration::from_secs(60));
        assert_eq!(meter.exhausted(), Some(BudgetKind::Wall));
        assert_eq!(meter.wall_left(), Some(Duration::ZERO));
        meter.charge(
            &model(Some(10_000.0), None),
            Usage {
                input_tokens: 1,
                output_tokens: 0,
            },
        );
        assert_eq!(meter.exhausted(), Some(BudgetKind::Cost));
        meter.charge(
            &model(None, None),
            Usage {
                input_tokens: 999,
                output_tokens: 0,
            },
        );
        assert_eq!(meter.exhausted(), Some(BudgetKind::Tokens));
        let event = serde_json::to_value(meter.event(BudgetKind::Tokens)).unwrap_or_default();
        assert_eq!(
            event,
            json!({"kind": "budget", "budget": "tokens", "used": 1000, "limit": 1000})
        );
        assert_eq!(BudgetMeter::new(BudgetIr::default()).exhausted(), None);
        assert_eq!(BudgetMeter::new(BudgetIr::default()).wall_left(), None);
    }
}
