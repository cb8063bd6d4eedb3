//! The issue codes a gate can emit and the repair arms that apply to its failures: shared
//! by the step graph (repair edges), the repair checks, the feedback warnings and the flow
//! facts.

use crate::syntax::ast::{Gate, GateRule, Ident, RepairArm, RepairPattern};

/// Every issue code `gate` can emit, in rule order: `hard`/`warn ... else CODE` and
/// `score ... below T CODE`.
pub(super) fn gate_codes(gate: &Gate) -> Vec<&Ident> {
    gate.rules
        .iter()
        .filter_map(|rule| match rule {
            GateRule::Check { code, .. } => Some(code),
            GateRule::Score { below, .. } => below.as_ref().map(|(_, code)| code),
        })
        .collect()
}

/// Whether `gate` can emit issue `code`.
fn gate_emits(gate: &Gate, code: &str) -> bool {
    gate.rules.iter().any(|rule| match rule {
        GateRule::Check { code: emitted, .. } => emitted.name == code,
        GateRule::Score { below, .. } => below
            .as_ref()
            .is_some_and(|(_, emitted)| emitted.name == code),
    })
}

/// Whether a repair arm can apply to failures of `gate`: a `_` arm always does, a code
/// arm when the gate emits one of its codes. An unknown gate (reported elsewhere) is
/// taken to match every arm.
pub(super) fn arm_applies(arm: &RepairArm, gate: Option<&Gate>) -> bool {
    let (RepairPattern::Codes(codes), Some(gate)) = (&arm.pattern, gate) else {
        return true;
    };
    codes.iter().any(|code| gate_emits(gate, &code.name))
}
