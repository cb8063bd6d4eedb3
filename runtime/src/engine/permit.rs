//! `permit TOOL when EXPR` (DESIGN §9.2): whether a tool call's arguments meet the role's rules for that tool, checked before the tool runs (live) and again when the call is traced.
//!
//! Every rule a role has for a tool must hold (a role may narrow a tool by several
//! conditions); a rule that cannot be evaluated does not hold. The condition sees `args`
//! (the call's arguments), `meta` (the role file's own front-matter keys) and the role
//! call's inputs under their template names ([`permit_inputs`]): in an `each` step, the
//! work item the call works on, so one role can hold different tools per kind of item.

use std::sync::Arc;

use charter_compiler::graph::{NameIr, PermitIr, RoleIr};
use charter_compiler::names::snake_case;
use serde_json::{Map, Value};

use crate::engine::eval::{Bindings, evaluate_bool};

/// The inputs of one call of `role` as its permits see them: `{work_order: {...}}`, each
/// input under its contract's snake_case name, as the compiler typed them (`args` and
/// `meta` are never shadowed; a repeated name keeps its first input). `Null` for a role
/// without permits, whose calls need none.
pub fn permit_inputs(role: &RoleIr, inputs: &[Arc<Value>]) -> Value {
    if role.permits.is_empty() {
        return Value::Null;
    }
    let mut named = Map::new();
    for (contract, value) in role.inputs.iter().zip(inputs) {
        let name = snake_case(contract);
        if name != "args" && name != "meta" && !named.contains_key(&name) {
            named.insert(name, Value::clone(value));
        }
    }
    Value::Object(named)
}

/// The first rule of `permits` for `tool` that the call does not meet (its text, as
/// written), or `None` when the call is permitted. `inputs` is [`permit_inputs`].
pub fn refused_by<'p>(
    permits: &'p [PermitIr],
    tool: &str,
    args: &Value,
    meta: &Value,
    inputs: &Value,
) -> Option<&'p str> {
    let mut bindings: Option<Bindings> = None;
    for permit in permits.iter().filter(|permit| permit.tool == tool) {
        let scope = bindings.get_or_insert_with(|| {
            let mut scope = Bindings::default();
            if let Value::Object(named) = inputs {
                for (name, value) in named {
                    scope.set(NameIr::Local(name.clone()), value.clone());
                }
            }
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

    use super::{permit_inputs, refused_by};

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
                &meta,
                &json!(null)
            ),
            None
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_9", "inputs": []}),
                &meta,
                &json!(null)
            ),
            Some("permit run_workflow when contains(meta.workflows, args.workflow_id)")
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_1", "inputs": ["a", "b"]}),
                &meta,
                &json!(null)
            ),
            Some("permit run_workflow when len(args.inputs) <= 1")
        );
        assert_eq!(
            refused_by(
                permits,
                "run_workflow",
                &json!({"workflow_id": "wf_1"}),
                &json!(null),
                &json!(null)
            ),
            Some("permit run_workflow when contains(meta.workflows, args.workflow_id)"),
            "a rule that cannot be evaluated does not hold"
        );
        assert_eq!(
            refused_by(permits, "other", &json!({}), &meta, &json!(null)),
            None
        );
    }

    #[test]
    fn a_rule_reads_the_work_item_the_call_works_on() {
        let text = r#"spec p version "1"
contract Request { need: string }
contract Order { id: string  kind: research | writing }
contract Plan { tasks: list<Order> }
contract Done { id: string }
contract Query { text: string }
contract Hits { urls: list<string> }
contract Page { path: string  text: string }
contract Saved { path: string }
tool web_search { input: Query output: Hits effect: read }
tool write_file { input: Page output: Saved effect: write }
role planner { model: "openai:m"  input: Request  output: Plan }
role worker {
  model: "openai:m"
  input: Order
  output: Done
  tools: [web_search, write_file]
  max_tool_calls: 2
  permit web_search when order.kind == research
  permit write_file when order.kind == writing
}
flow {
  plan = planner(request) -> work
  work = each t in plan.tasks: worker(t) -> done
}
"#;
        let compilation = compile("p.charter", text, &MemoryLoader::default());
        let spec = compilation
            .spec
            .unwrap_or_else(|| panic!("{:#?}", compilation.diagnostics));
        let role = &spec.roles["worker"];
        let research = permit_inputs(
            role,
            &[std::sync::Arc::new(
                json!({"id": "T-1", "kind": "research"}),
            )],
        );
        assert_eq!(
            research,
            json!({"order": {"id": "T-1", "kind": "research"}})
        );
        let search = json!({"text": "heat pumps"});
        let page = json!({"path": "a.md", "text": "x"});
        let refused = |args: &serde_json::Value, tool: &str, inputs: &serde_json::Value| {
            refused_by(&role.permits, tool, args, &json!(null), inputs).map(str::to_string)
        };
        assert_eq!(refused(&search, "web_search", &research), None);
        assert_eq!(
            refused(&page, "write_file", &research),
            Some("permit write_file when order.kind == writing".to_string())
        );
        let writing = permit_inputs(
            role,
            &[std::sync::Arc::new(json!({"id": "T-2", "kind": "writing"}))],
        );
        assert_eq!(refused(&page, "write_file", &writing), None);
        assert_eq!(
            refused(&search, "web_search", &writing),
            Some("permit web_search when order.kind == research".to_string())
        );
    }
}
