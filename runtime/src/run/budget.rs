//! Budgets: tokens, cost (from model prices), wall time and steps, and which one ran out.

use charter_compiler::graph::{BudgetIr, RoleModelIr};
use serde_json::Number;

use super::state::Counters;
use crate::provider::Usage;
pub use crate::trace::BudgetKind;

/// USD a call cost at the model's prices (per one million tokens); 0 without prices.
pub fn call_cost(model: &RoleModelIr, usage: Usage) -> f64 {
    let input = model.price_in.unwrap_or(0.0) * usage.input_tokens as f64;
    let output = model.price_out.unwrap_or(0.0) * usage.output_tokens as f64;
    (input + output) / 1_000_000.0
}

/// The first budget the counters exceed: tokens, cost, wall, in that order. (Steps are
/// checked before a step starts, by [`steps_exhausted`].)
pub fn exhausted(budget: &BudgetIr, counters: &Counters) -> Option<BudgetKind> {
    if budget.tokens.is_some_and(|limit| counters.tokens > limit) {
        return Some(BudgetKind::Tokens);
    }
    if budget.cost.is_some_and(|limit| counters.cost > limit + 1e-12) {
        return Some(BudgetKind::Cost);
    }
    if budget.wall_ms.is_some_and(|limit| counters.elapsed_ms >= limit) {
        return Some(BudgetKind::Wall);
    }
    None
}

/// What was used of budget `which`, and its limit, as trace numbers.
pub fn used_and_limit(budget: &BudgetIr, counters: &Counters, which: BudgetKind) -> (Number, Number) {
    let float = |value: f64| Number::from_f64((value * 1_000_000.0).round() / 1_000_000.0).unwrap_or_else(|| Number::from(0));
    match which {
        BudgetKind::Tokens => (Number::from(counters.tokens), Number::from(budget.tokens.unwrap_or(0))),
        BudgetKind::Cost => (float(counters.cost), float(budget.cost.unwrap_or(0.0))),
        BudgetKind::Wall => (Number::from(counters.elapsed_ms), Number::from(budget.wall_ms.unwrap_or(0))),
        BudgetKind::Steps => (Number::from(counters.step_count), Number::from(budget.steps.unwrap_or(0))),
    }
}

/// True when starting one more step would exceed `budget.steps`.
pub fn steps_exhausted(budget: &BudgetIr, counters: &Counters) -> bool {
    budget
        .steps
        .is_some_and(|limit| counters.step_count >= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_uses_prices_per_million_tokens() {
        let model = RoleModelIr {
            alias: None,
            provider: "openai".into(),
            model: "m".into(),
            price_in: Some(0.15),
            price_out: Some(0.60),
        };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
        };
        assert!((call_cost(&model, usage) - 0.45).abs() < 1e-9);
    }

    #[test]
    fn the_first_exceeded_budget_is_named() {
        let budget = BudgetIr {
            tokens: Some(100),
            cost: Some(1.0),
            wall_ms: Some(1000),
            steps: Some(2),
        };
        let mut counters = Counters::default();
        assert_eq!(exhausted(&budget, &counters), None);
        counters.elapsed_ms = 1000;
        assert_eq!(exhausted(&budget, &counters), Some(BudgetKind::Wall));
        counters.tokens = 101;
        assert_eq!(exhausted(&budget, &counters), Some(BudgetKind::Tokens));
        counters.step_count = 2;
        assert!(steps_exhausted(&budget, &counters));
    }
}
