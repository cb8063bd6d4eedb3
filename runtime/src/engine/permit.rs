//! `permit TOOL when EXPR` (DESIGN §9.2): whether a tool call's arguments meet the role's rules for that tool, checked before the tool runs (live) and again when the call is traced.
//!
//! Every rule a role has for a tool must hold (a role may narrow a tool by several
//! conditions); a rule that cannot be evaluated does not hold. The condition sees `args`
//! (the call's arguments) and `meta` (the role file's own front-matter keys).

use charter_compiler::graph::{NameIr, PermitIr};
use serde_json::Value;

use crate::engine::eval::{Bindings, evaluate_bool};

/// The first rule of `permits` for `tool` that the call's `args` do not meet (its text, as
/// written), or `None` when the call is permitted.
pub fn refused_by<'p>(
    permits: &'p [PermitIr],
    tool: &str,
    args: &Value,
    meta: &Value,
) -> Option<&'p str> {
    let mut bindings: Option<Bindings> = None;
    for permit in permits.iter().filter(|permit| permit.tool == tool) {
        let scope = bindings.get_or_insert_with(|| {
            let mut scope = Bindings::default();
            scope.set(NameIr::Local("args".to_string()), args.clone());
            scope.set(NameIr::Local("meta".to_string()), meta.clone());
            scope
        });
        if !evaluate_bool(&permit.condition, scope).unwrap_or(false) {
            return Some(&permit.rule);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use charter_compiler::{MemoryLoader, compile};
    use serde_json::json;

    use super::refused_by;

    #[test]
    fn every_rule_for_the_tool_must_hold() {
        let text = r#"spec p version "1"
contract Request { text: string }
contract Reply { text: string }
contract Run { workflow_id: string  inputs: list<string> = [] }
contract Ticket { run_id: string }
tool run_workflow { input: Run output: Ticket effect: external }
role runner {
  model: "openai:m"
  input: Request
  output: Reply
  tools: [run_workflow]
  max_tool_calls: 2
  permit run_workflow when contains(meta.workflows, args.workflow_id)
  permit run_workflow when len(args.inputs) <= 1
}
flow { answer = runner(request) -> done }
"#;
        let compilation = compile("p.charter", text, &MemoryLoader::default());
        let spec = compilation
            .spec
            .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
        let permits = &spec.roles["runner"].permits;
        let meta = json!({"workflows": ["wf_1"]});
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_1", "inputs": []}),
                &meta
            ),
            None
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_9", "inputs": []}),
                &meta
            ),
            Some("permit run_workflow when contains(meta.workflows, args.workflow_id)")
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_1", "inputs": ["a", "b"]}),
                &meta
            ),
            Some("permit run_workflow when len(args.inputs) <= 1")
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_1"}),
                &json!(null)
            ),
            Some("permit run_workflow when contains(meta.workflows, args.workflow_id)"),
            "a rule that cannot be evaluated does not hold"
        );
        assert_eq!(refused_by(permits, "other", &json!({}), &meta), None);
    }
}
